// LaunchEstimate: the device time of one launch on a stream, learned from
// measured segments (device time between two markers / launches between them).
#pragma once

#include <cstdint>

namespace egpu::pacing {

class LaunchEstimate {
 public:
  explicit LaunchEstimate(double weight) : weight_(weight) {}

  // One measured segment: `launches` launches took `device_ns` of device time.
  void add_segment(int64_t device_ns, uint32_t launches);
  // Starts from another stream's estimate instead of knowing nothing.
  void seed(int64_t per_launch_ns);

  bool known() const { return known_; }
  // Nanoseconds per launch; 0 while unknown.
  int64_t per_launch_ns() const { return known_ ? static_cast<int64_t>(per_launch_) : 0; }

 private:
  double weight_;
  double per_launch_ = 0;
  bool known_ = false;
};

// Launches between markers so that markers are about limit/4 of estimated
// device time apart, in 1..max. Unknown durations measure every launch; launches
// that take no time measurably keep the interval at its maximum.
uint32_t marker_interval(const LaunchEstimate& estimate, int64_t inflight_limit_ns,
                         uint32_t max_interval);

// The per-launch device time the in-flight bound assumes: the estimate when
// known, otherwise half the limit (so only two launches of unknown length run
// ahead of the first measurement).
int64_t bound_launch_ns(const LaunchEstimate& estimate, int64_t inflight_limit_ns);

}  // namespace egpu::pacing
