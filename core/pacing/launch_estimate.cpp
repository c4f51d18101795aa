#include "core/pacing/launch_estimate.h"

#include <algorithm>

namespace egpu::pacing {

void LaunchEstimate::add_segment(int64_t device_ns, uint32_t launches) {
  if (launches == 0) return;
  const double sample = static_cast<double>(std::max<int64_t>(device_ns, 0)) / launches;
  if (!known_) {
    per_launch_ = sample;
    known_ = true;
    return;
  }
  per_launch_ += weight_ * (sample - per_launch_);
}

void LaunchEstimate::seed(int64_t per_launch_ns) {
  if (known_ || per_launch_ns < 0) return;
  per_launch_ = static_cast<double>(per_launch_ns);
  known_ = true;
}

uint32_t marker_interval(const LaunchEstimate& estimate, int64_t inflight_limit_ns,
                         uint32_t max_interval) {
  const uint32_t max_k = std::max<uint32_t>(max_interval, 1);
  if (!estimate.known()) return 1;
  const int64_t per_launch = estimate.per_launch_ns();
  const int64_t spacing = std::max<int64_t>(inflight_limit_ns / 4, 1);
  if (per_launch <= 0) return max_k;
  const int64_t k = spacing / per_launch;
  return static_cast<uint32_t>(std::clamp<int64_t>(k, 1, max_k));
}

int64_t bound_launch_ns(const LaunchEstimate& estimate, int64_t inflight_limit_ns) {
  if (estimate.known()) return estimate.per_launch_ns();
  return std::max<int64_t>(inflight_limit_ns / 2, 1);
}

}  // namespace egpu::pacing
