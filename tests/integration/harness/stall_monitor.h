// StallMonitor: notices when this machine stops running programs for a while.
// Small shared VMs lose their CPUs to the host for 5-80 ms at a time, several
// times a minute in bad spells, whatever runs in them. A latency measured
// across such a stall says nothing about the code under test; tests use the
// recorded stalls to leave those measurements out and say how many they left.
//
// On each CPU a thread pinned there sleeps 1 ms at a time and records every
// wake-up that came more than `threshold` late: a host takes one vCPU as
// often as all of them, and the processes under test then crowd onto the
// others. The threads ask for SCHED_FIFO, so that the CPU load of the
// processes under test cannot delay them (only the host, or the kernel, can);
// where that is refused (not root) they run at normal priority and say so.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace egpu::harness {

struct Stall {
  std::chrono::steady_clock::time_point from;
  std::chrono::steady_clock::time_point to;
};

class StallMonitor {
 public:
  explicit StallMonitor(std::chrono::microseconds threshold = std::chrono::milliseconds(1));
  ~StallMonitor();  // stops the thread
  StallMonitor(const StallMonitor&) = delete;
  StallMonitor& operator=(const StallMonitor&) = delete;

  std::vector<Stall> stalls() const;
  bool realtime() const { return realtime_.load(); }

 private:
  void loop(int cpu);

  std::chrono::microseconds threshold_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> realtime_{true};
  mutable std::mutex mutex_;
  std::vector<Stall> stalls_;
  std::vector<std::thread> threads_;
};

// Whether [from, to] overlaps a stall, or starts within `aftermath` of one's
// end (work queued up during a stall is still being caught up with).
bool overlaps_stall(std::chrono::steady_clock::time_point from,
                    std::chrono::steady_clock::time_point to, const std::vector<Stall>& stalls,
                    std::chrono::microseconds aftermath);

}  // namespace egpu::harness
