// Tunables of one GPU's slice scheduler, with their validation.
#ifndef EGPU_CORE_FAA_CONFIG_H
#define EGPU_CORE_FAA_CONFIG_H

#include "core/faa/types.h"
#include "core/util/result.h"

namespace egpu::faa {

struct Config {
  // Longest time one grant lasts (DESIGN: default 10 ms, settable 1-50 ms).
  Nanos slice = 10 * kMillisecond;
  // Time constant of the decayed usage that defines the achieved share.
  Nanos tau = 500 * kMillisecond;
  // A newly asking instance whose deviation is this far (fraction of the GPU,
  // 0.05 = 5 pp) below the holder's takes the slice before it ends.
  double preempt_threshold = 0.05;
  // The holder keeps the slice at least this long before a preemption.
  Nanos min_hold = 1 * kMillisecond;
  // A cap instance is granted only with at least this much in its token bucket.
  Nanos min_cap_grant = 1 * kMillisecond;

  // Ok, or a message naming the first field out of range and its valid range.
  Status validate() const;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_CONFIG_H
