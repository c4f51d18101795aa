// Wall time of a run: its duration limit, interruptible sleeps and a
// once-a-second progress line.
#pragma once

#include <chrono>
#include <string>

namespace egpu::workload {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to);

class RunClock {
 public:
  // duration_s == 0: never expires.
  explicit RunClock(double duration_s);

  Clock::time_point start() const { return start_; }
  double elapsed_s() const { return seconds_between(start_, Clock::now()); }
  // time_point::max() without a limit.
  Clock::time_point deadline() const { return has_limit_ ? deadline_ : Clock::time_point::max(); }
  bool expired() const { return has_limit_ && Clock::now() >= deadline_; }
  // Whether the run should stop: duration over or a stop signal.
  bool should_stop() const;

 private:
  Clock::time_point start_;
  Clock::time_point deadline_;
  bool has_limit_;
};

// Sleeps until `when`; returns early (false) when a stop signal arrives.
bool sleep_until(Clock::time_point when);
bool sleep_for(std::chrono::nanoseconds duration);

// Prints "<workload>[pid] t=..s <counters>" to stderr at most once a second.
class ProgressReporter {
 public:
  ProgressReporter(bool enabled, std::string workload);
  void report(const RunClock& clock, const std::string& counters);

 private:
  bool enabled_;
  std::string prefix_;
  Clock::time_point next_;
};

}  // namespace egpu::workload
