// TokenBucket: `burst` tokens at once, refilled at `per_second`; what is
// taken may leave it in debt, which the refill pays first. The one bucket
// behind LogBudget (lines a source may log) and RequestBudget (what a user's
// requests may cost the agent). Pure: the caller passes a monotonic time; a
// time before the last one refills nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace egpu {

class TokenBucket {
 public:
  TokenBucket(double burst, double per_second) : burst_(burst), rate_(per_second), tokens_(burst) {}

  // The tokens there are at `now_ns` (below zero: a debt).
  double tokens(int64_t now_ns) const {
    if (now_ns <= at_ns_) return tokens_;
    return std::min(burst_, tokens_ + rate_ * static_cast<double>(now_ns - at_ns_) / 1e9);
  }
  bool full(int64_t now_ns) const { return tokens(now_ns) >= burst_; }
  // Takes `n` at `now_ns`, whatever is there.
  void take(double n, int64_t now_ns) {
    tokens_ = tokens(now_ns) - n;
    at_ns_ = std::max(at_ns_, now_ns);
  }
  // When there are `n` tokens again: `now_ns` if there are now; INT64_MAX
  // for a bucket that never refills.
  int64_t ready_at(double n, int64_t now_ns) const {
    const double have = tokens(now_ns);
    if (have >= n) return now_ns;
    if (rate_ <= 0) return INT64_MAX;
    return now_ns + static_cast<int64_t>(std::ceil((n - have) / rate_ * 1e9));
  }

 private:
  double burst_;
  double rate_;
  double tokens_;
  int64_t at_ns_ = 0;  // a full bucket is full whenever it was last looked at
};

}  // namespace egpu
