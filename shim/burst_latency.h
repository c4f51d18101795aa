// BurstLatency: the latency the shim can see without the program's help. A
// burst of GPU work runs from the first launch after the process was idle to
// the synchronising call that finds its work done; its span (and the part of
// it spent waiting at the gate) is a request's latency for a server that
// serves one batch at a time. A server with requests overlapping on the GPU
// sees its busy periods instead, and should report requests itself
// (shim/include/egpu/latency.h).
//
// One per GPU binding. The launch path pays one relaxed load while a burst is
// open; threads may race to open one, and either start is as good.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

namespace egpu::shim {

class BurstLatency {
 public:
  struct Burst {
    int64_t span_ns;
    int64_t gate_ns;
  };

  // Whether a launch now opens a burst (then the caller reads the process's
  // gate time before the launch is admitted, and passes it to launched()).
  bool opening() const { return start_ns_.load(std::memory_order_relaxed) == 0; }
  // A launch that arrived at `now` (launch clock) went out; `throttled_before`:
  // the process's time at the gate before it was admitted. Of threads racing
  // to open a burst one wins, with its own start and gate time.
  void launched(int64_t now, uint64_t throttled_before) {
    int64_t none = 0;
    if (!start_ns_.compare_exchange_strong(none, now, std::memory_order_relaxed)) return;
    throttled_at_start_.store(throttled_before, std::memory_order_relaxed);
  }

  // A synchronising call at `now` found nothing queued: the open burst, if
  // any, ends.
  std::optional<Burst> ended(int64_t now, uint64_t throttled_ns) {
    const int64_t start = start_ns_.exchange(0, std::memory_order_relaxed);
    if (start == 0 || now < start) return std::nullopt;
    const uint64_t before = throttled_at_start_.load(std::memory_order_relaxed);
    const int64_t gate = throttled_ns >= before ? static_cast<int64_t>(throttled_ns - before) : 0;
    return Burst{now - start, gate < now - start ? gate : now - start};
  }

 private:
  std::atomic<int64_t> start_ns_{0};  // 0: no burst open
  std::atomic<uint64_t> throttled_at_start_{0};
};

// Where the program reports its own latencies (egpu_report_latency) its
// bursts no longer count, or each request would count twice. Per GPU: a
// process reports to one of its GPUs, and the others keep their bursts.
class LatencyReports {
 public:
  bool from_program() const { return set_.load(std::memory_order_relaxed); }
  void note_program_reports() { set_.store(true, std::memory_order_relaxed); }

 private:
  std::atomic<bool> set_{false};
};

}  // namespace egpu::shim
