#include "stall_monitor.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

namespace egpu::harness {

StallMonitor::StallMonitor(std::chrono::microseconds threshold)
    : threshold_(threshold), thread_([this] { loop(); }) {}

StallMonitor::~StallMonitor() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void StallMonitor::loop() {
  sched_param param{};
  param.sched_priority = 1;  // above every normal thread, below the kernel's own
  realtime_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
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
