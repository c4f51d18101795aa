// Latency samples on an instance page: the one way shims write
// InstancePage::latency_counts and the burst totals and the agent reads them
// (see pages.h), so the writing and the reading (LatencyHistogram::delta)
// agree on buckets, and every value read is bounded.
#pragma once

#include <algorithm>
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

// The counts as the agent takes them (each at most kMaxCumulative; the
// reader still treats one that went down as a reset).
inline slo::LatencyHistogram::Counts read_latency_counts(const InstancePage& page) {
  slo::LatencyHistogram::Counts counts{};
  for (std::size_t i = 0; i < counts.size(); ++i) {
    counts[i] = std::min(page.latency_counts[i].load(std::memory_order_relaxed), kMaxCumulative);
  }
  return counts;
}

struct BurstTotals {
  uint64_t span_ns = 0;
  uint64_t gate_ns = 0;  // <= span_ns
};

inline BurstTotals read_burst_totals(const InstancePage& page) {
  BurstTotals t;
  t.span_ns = std::min(page.burst_ns.load(std::memory_order_relaxed), kMaxCumulative);
  t.gate_ns = std::min(page.burst_gate_ns.load(std::memory_order_relaxed), t.span_ns);
  return t;
}

}  // namespace egpu::shm
