#include "core/pacing/local_duty_cycle.h"

#include <algorithm>

namespace egpu::pacing {

void LocalDutyCycle::start(double share, uint64_t instance_device_ns, int64_t now) {
  const double rate = std::clamp(share, 0.01, 1.0);
  bucket_.emplace(rate, static_cast<double>(burst_ns_), now);
  charged_device_ns_ = instance_device_ns;
}

int64_t LocalDutyCycle::wait_ns(uint64_t instance_device_ns, int64_t now) {
  if (!bucket_) return 0;
  if (instance_device_ns > charged_device_ns_) {
    bucket_->spend(static_cast<double>(instance_device_ns - charged_device_ns_), now);
    charged_device_ns_ = instance_device_ns;
  }
  // Any positive level admits a launch; its cost is charged once measured.
  const int64_t ready = bucket_->ready_at(1, now);
  if (ready == TokenBucket::kNever) return burst_ns_;
  return std::max<int64_t>(ready - now, 0);
}

}  // namespace egpu::pacing
