// The latency-reporting API (shim/include/egpu/latency.h): C exports, no
// exception crosses them, and a failure is a return value, never the
// program's problem.
#include <time.h>

#include <cstdint>

#include "core/shm/latency_counts.h"
#include "egpu/latency.h"
#include "shim/process_state.h"

namespace {

// CLOCK_MONOTONIC in ns, offset by one so a token is never 0.
uint64_t token_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec) + 1;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int egpu_report_latency(int64_t nanoseconds) {
  try {
    if (nanoseconds < 0) return EGPU_LATENCY_INVALID;
    egpu::shim::ProcessState* s = egpu::shim::process_state();
    if (s == nullptr || !s->usable()) return EGPU_LATENCY_NOT_ATTACHED;
    egpu::shim::GpuBinding* b = s->reporting_binding();
    const egpu::shim::Attachment* a = b != nullptr ? b->attachment() : nullptr;
    if (a == nullptr) return EGPU_LATENCY_NOT_ATTACHED;
    egpu::shm::add_latency_sample(*a->instance, nanoseconds);
    b->reports().note_program_reports();
    return EGPU_LATENCY_OK;
  } catch (...) {
    return EGPU_LATENCY_NOT_ATTACHED;
  }
}

__attribute__((visibility("default"))) uint64_t egpu_request_begin(void) {
  return token_now();
}

__attribute__((visibility("default"))) int egpu_request_end(uint64_t token) {
  const uint64_t now = token_now();
  if (token == 0 || token > now) return EGPU_LATENCY_INVALID;
  return egpu_report_latency(static_cast<int64_t>(now - token));
}

}  // extern "C"
