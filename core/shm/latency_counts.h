// Adding latency samples to an instance page: the one way shims write
// InstancePage::latency_counts and the burst totals (see pages.h), so the
// agent's reading (LatencyHistogram::delta) and the writing agree on buckets.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/shm/pages.h"
#include "core/slo/latency_histogram.h"

namespace egpu::shm {

// One sample of `ns` (a request, or a burst of GPU work).
inline void add_latency_sample(InstancePage& page, int64_t ns) {
  page.latency_counts[slo::latency_bucket(ns)].fetch_add(1, std::memory_order_relaxed);
}

// A burst that spanned `span_ns`, `gate_ns` of it waiting at the gate.
inline void add_burst(InstancePage& page, int64_t span_ns, int64_t gate_ns) {
  page.burst_ns.fetch_add(static_cast<uint64_t>(span_ns > 0 ? span_ns : 0),
                          std::memory_order_relaxed);
  page.burst_gate_ns.fetch_add(static_cast<uint64_t>(gate_ns > 0 ? gate_ns : 0),
                               std::memory_order_relaxed);
}

}  // namespace egpu::shm
