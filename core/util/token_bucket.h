// TokenBucket: fills at `rate` tokens per nanosecond up to `capacity`, and
// starts full. Spending may leave it in debt (below zero), which the refill
// pays first. The one bucket behind a cap instance's grants (tokens are
// nanoseconds of device time), the shim's local duty cycle, LogBudget and
// RequestBudget. Pure: the caller passes a monotonic time; a time before the
// last one refills nothing.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace egpu {

class TokenBucket {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  TokenBucket(double rate, double capacity, int64_t now)
      : rate_(rate), capacity_(capacity), level_(capacity), updated_(now) {}

  // Refills at the old rate up to `now`, then fills at `rate`.
  void set_rate(double rate, int64_t now) {
    refill(now);
    rate_ = rate;
  }
  // Takes `amount` at `now`, whatever is there.
  void spend(double amount, int64_t now) {
    refill(now);
    level_ -= amount;
  }

  // Whole tokens at `now`, rounded down (a debt past int64's range reads as
  // its least value).
  int64_t tokens(int64_t now) const {
    const double level = std::floor(level_at(now));
    constexpr double kLeast = static_cast<double>(std::numeric_limits<int64_t>::min());
    return level > kLeast ? static_cast<int64_t>(level) : std::numeric_limits<int64_t>::min();
  }
  // tokens(now) >= amount, cheaply (every FAA decision asks it of every cap
  // instance).
  bool holds(double amount, int64_t now) const { return level_at(now) >= amount; }
  bool full(int64_t now) const { return level_at(now) >= capacity_; }

  // Earliest time at which the bucket holds `needed`: `now` (or the last
  // update, if later) if it does already; kNever if it never will (no refill,
  // more than it can hold, or a wait past the clock's range).
  int64_t ready_at(double needed, int64_t now) const {
    const double missing = needed - level_at(now);
    const int64_t from = now > updated_ ? now : updated_;
    if (missing <= 0.0) return from;
    if (rate_ <= 0.0 || needed > capacity_) return kNever;
    // A level driven far below zero (device time a job reported) must not
    // overflow the conversion.
    const double wait = std::ceil(missing / rate_);
    if (!(wait < static_cast<double>(kNever - from))) return kNever;
    return from + static_cast<int64_t>(wait);
  }

 private:
  double level_at(int64_t now) const {
    if (now <= updated_) return level_;
    const double level = level_ + rate_ * static_cast<double>(now - updated_);
    return level < capacity_ ? level : capacity_;
  }
  void refill(int64_t now) {
    level_ = level_at(now);
    if (now > updated_) updated_ = now;
  }

  double rate_;
  double capacity_;
  double level_;
  int64_t updated_;
};

}  // namespace egpu
