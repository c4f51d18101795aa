#include "run_clock.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

#include "stop_signal.h"

namespace egpu::workload {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

RunClock::RunClock(double duration_s)
    : start_(Clock::now()),
      deadline_(start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(duration_s))),
      has_limit_(duration_s > 0) {}

bool RunClock::should_stop() const {
  return stop_requested() || expired();
}

bool sleep_until(Clock::time_point when) {
  // steady_clock is CLOCK_MONOTONIC on Linux; an absolute deadline does not drift
  // when a signal interrupts the sleep.
  const auto since_epoch = when.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  timespec deadline{};
  deadline.tv_sec = static_cast<time_t>(secs.count());
  deadline.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - secs).count());
  while (!stop_requested()) {
    const int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr);
    if (rc == 0) return true;
    if (rc != EINTR) return Clock::now() >= when;
  }
  return false;
}

bool sleep_for(std::chrono::nanoseconds duration) {
  if (duration.count() <= 0) return !stop_requested();
  return sleep_until(Clock::now() + duration);
}

ProgressReporter::ProgressReporter(bool enabled, std::string workload)
    : enabled_(enabled),
      prefix_(std::move(workload) + "[" + std::to_string(getpid()) + "]"),
      next_(Clock::now() + std::chrono::seconds(1)) {}

void ProgressReporter::report(const RunClock& clock, const std::string& counters) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (now < next_) return;
  next_ = now + std::chrono::seconds(1);
  std::fprintf(stderr, "%s t=%.1fs %s\n", prefix_.c_str(), clock.elapsed_s(), counters.c_str());
}

}  // namespace egpu::workload
