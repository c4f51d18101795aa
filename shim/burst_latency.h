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

  // A launch at `now` (launch clock); `throttled_ns`: the process's time at
  // the gate so far, read only when a burst opens.
  template <typename ThrottledNs>
  void launched(int64_t now, ThrottledNs&& throttled_ns) {
    if (start_ns_.load(std::memory_order_relaxed) != 0) return;
    throttled_at_start_.store(throttled_ns(), std::memory_order_relaxed);
    start_ns_.store(now, std::memory_order_relaxed);
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

}  // namespace egpu::shim
