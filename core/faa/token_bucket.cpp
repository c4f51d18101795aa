#include "core/faa/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace egpu::faa {

TokenBucket::TokenBucket(double rate, Nanos capacity, Nanos now)
    : rate_(rate),
      capacity_(static_cast<double>(capacity)),
      level_(static_cast<double>(capacity)),
      updated_(now) {}

void TokenBucket::refill(Nanos now) {
  level_ = level_at(now);
  updated_ = std::max(updated_, now);
}

void TokenBucket::set_rate(double rate, Nanos now) {
  refill(now);
  rate_ = rate;
}

void TokenBucket::spend(Nanos device_time, Nanos now) {
  refill(now);
  level_ -= static_cast<double>(device_time);
}

Nanos TokenBucket::tokens(Nanos now) const {
  return static_cast<Nanos>(std::floor(level_at(now)));
}

Nanos TokenBucket::ready_at(Nanos needed, Nanos now) const {
  const double level = level_at(now);
  const double missing = static_cast<double>(needed) - level;
  if (missing <= 0.0) return std::max(now, updated_);
  if (rate_ <= 0.0 || static_cast<double>(needed) > capacity_) return kNever;
  const Nanos from = std::max(now, updated_);
  // A level driven far below zero (device time a job reported) must not
  // overflow the conversion: past kNever it is never.
  const double wait = std::ceil(missing / rate_);
  if (!(wait < static_cast<double>(kNever - from))) return kNever;
  return from + static_cast<Nanos>(wait);
}

}  // namespace egpu::faa
