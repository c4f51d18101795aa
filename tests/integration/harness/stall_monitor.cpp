#include "stall_monitor.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "realtime_thread.h"

namespace egpu::harness {

StallMonitor::StallMonitor(std::chrono::microseconds threshold) : threshold_(threshold) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) == 0) {
    threads_.emplace_back([this] { loop(-1); });
    return;
  }
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &cpus)) threads_.emplace_back([this, cpu] { loop(cpu); });
  }
}

StallMonitor::~StallMonitor() {
  stopping_ = true;
  for (std::thread& t : threads_)
    t.join();
}

void StallMonitor::loop(int cpu) {
  // Priority 1: above every normal thread, below egpu-host-stalls' spinners.
  if (pin_realtime(cpu, 1) != 0) realtime_ = false;
  using Clock = std::chrono::steady_clock;
  constexpr auto kNap = std::chrono::milliseconds(1);
  while (!stopping_) {
    const Clock::time_point before = Clock::now();
    const timespec nap{0, std::chrono::nanoseconds(kNap).count()};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, nullptr);
    const Clock::time_point after = Clock::now();
    if (after - before - kNap > threshold_) {
      std::lock_guard lock(mutex_);
      stalls_.push_back(Stall{before + kNap, after});
    }
  }
}

std::vector<Stall> StallMonitor::stalls() const {
  std::lock_guard lock(mutex_);
  return stalls_;
}

bool overlaps_stall(std::chrono::steady_clock::time_point from,
                    std::chrono::steady_clock::time_point to, const std::vector<Stall>& stalls,
                    std::chrono::microseconds aftermath) {
  for (const Stall& s : stalls) {
    if (from <= s.to + aftermath && to >= s.from) return true;
  }
  return false;
}

}  // namespace egpu::harness
