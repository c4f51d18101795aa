// LocalDutyCycle: what a shim does in fail mode "closed" while the agent is
// dead: it holds its instance at the last known share by itself, from the
// device time the instance's processes measured (their ProcSlot.device_ns sum).
// A token bucket filling at `share` ns per ns, holding at most one burst.
#pragma once

#include <cstdint>
#include <optional>

#include "core/util/token_bucket.h"

namespace egpu::pacing {

class LocalDutyCycle {
 public:
  explicit LocalDutyCycle(int64_t burst_ns = 10'000'000) : burst_ns_(burst_ns) {}

  // (Re)starts at `share` (0..1] with the instance's device time so far.
  void start(double share, uint64_t instance_device_ns, int64_t now);
  bool started() const { return bucket_.has_value(); }
  void stop() { bucket_.reset(); }
  // Charges the device time used since the last call; returns 0 when a launch
  // may go now, otherwise how long to wait before asking again.
  int64_t wait_ns(uint64_t instance_device_ns, int64_t now);

 private:
  int64_t burst_ns_;
  std::optional<TokenBucket> bucket_;
  uint64_t charged_device_ns_ = 0;
};

}  // namespace egpu::pacing
