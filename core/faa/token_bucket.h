// The token bucket that keeps a cap instance at or below its target: it fills
// at target nanoseconds of device time per nanosecond, holds at most one slice,
// and is drained by the device time actually charged (so it may go negative
// after a long kernel, which delays the next grant accordingly).
#ifndef EGPU_CORE_FAA_TOKEN_BUCKET_H
#define EGPU_CORE_FAA_TOKEN_BUCKET_H

#include "core/faa/types.h"

namespace egpu::faa {

class TokenBucket {
 public:
  // Starts full.
  TokenBucket(double rate, Nanos capacity, Nanos now);

  // Refills at the old rate up to `now`, then fills at `rate`.
  void set_rate(double rate, Nanos now);
  void spend(Nanos device_time, Nanos now);

  // Tokens at `now` (>= the last update), as whole nanoseconds rounded down.
  Nanos tokens(Nanos now) const;
  // tokens(now) >= amount, cheaply (every decision asks it of every cap
  // instance).
  bool holds(Nanos amount, Nanos now) const { return level_at(now) >= static_cast<double>(amount); }
  // Earliest time at which tokens(t) >= needed; `now` if already there.
  Nanos ready_at(Nanos needed, Nanos now) const;

 private:
  double level_at(Nanos now) const {
    if (now <= updated_) return level_;
    const double level = level_ + rate_ * static_cast<double>(now - updated_);
    return level < capacity_ ? level : capacity_;
  }
  void refill(Nanos now);

  double rate_;
  double capacity_;
  double level_;
  Nanos updated_;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_TOKEN_BUCKET_H
