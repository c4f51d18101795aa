// Everything the scheduler keeps about one instance (internal to core/faa).
#ifndef EGPU_CORE_FAA_INSTANCE_STATE_H
#define EGPU_CORE_FAA_INSTANCE_STATE_H

#include <cstdint>

#include "core/faa/types.h"
#include "core/util/token_bucket.h"

namespace egpu::faa {

// The fields every decision reads come first, so that they share one cache
// line: a decision scans all instances.
struct InstanceState {
  InstanceState(InstanceId instance_id, double target_share, Mode instance_mode, Nanos slice,
                Nanos now)
      : target(target_share),
        id(instance_id),
        mode(instance_mode),
        usage_per_grant(slice),
        bucket(target_share, slice, now) {}

  // Decayed device time, in the DecayClock's stored frame.
  double used = 0.0;
  // The part of `used` that join() and resizes credited rather than the
  // device (stored frame, decayed alike; negative after shrinks): the
  // scheduler's joined history holds the sum over its instances. `used` is
  // the scheduler's reckoning of what it had (negative when a shrink left it
  // owed more than it used); `device` is what it ran (charged, decayed
  // alike): the achieved share status and metrics show.
  double credited = 0.0;
  double device = 0.0;
  // 1 / pre_grant_share(): the ordering key is used * order_weight.
  double order_weight = 0.0;
  Nanos waiting_since = 0;  // asking and not holding since (valid while so)
  // Longest wait allowed between grants: (ceil(1 / target) + 1) slices.
  Nanos patience = 0;
  // Queued device time not yet charged (set_pending), true nanoseconds.
  Nanos pending = 0;
  // Device time charged since its latest grant began.
  Nanos usage_this_grant = 0;
  double target;
  InstanceId id;
  Mode mode;
  bool asking = false;

  // What its latest grant used (feeds order_weight; a full slice at first).
  Nanos usage_per_grant;
  Nanos asking_since = 0;  // start of the current asking stretch

  TokenBucket bucket;  // used in cap mode only

  Nanos charged_total = 0;
  Nanos throttled = 0;
  Nanos longest_wait = 0;
  std::uint64_t grants = 0;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_INSTANCE_STATE_H
