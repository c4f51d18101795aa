#include "core/util/request_budget.h"

#include <algorithm>
#include <cmath>

namespace egpu {
namespace {

// Entries kept before the full ones are dropped: users are keyed as the
// control server counts them (uids that own no instance count as one), so
// this is reached only on a node of thousands of tenants.
constexpr size_t kForgetAbove = 4096;

}  // namespace

double RequestBudget::tokens_at(const Bucket& b, int64_t now_ns) const {
  if (now_ns <= b.at_ns) return b.tokens;
  return std::min(burst_, b.tokens + rate_ * static_cast<double>(now_ns - b.at_ns) / 1e9);
}

double RequestBudget::tokens_of(uid_t uid, int64_t now_ns) const {
  auto it = buckets_.find(uid);
  return it == buckets_.end() ? burst_ : tokens_at(it->second, now_ns);  // none: full
}

bool RequestBudget::may_serve(uid_t uid, int64_t now_ns) const {
  return tokens_of(uid, now_ns) >= 1.0;
}

void RequestBudget::charge(uid_t uid, double cost, int64_t now_ns) {
  auto it = buckets_.find(uid);
  const double tokens = tokens_of(uid, now_ns) - std::max(1.0, cost);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kForgetAbove) forget_full(now_ns);
    buckets_.emplace(uid, Bucket{tokens, now_ns});
  } else {
    it->second = Bucket{tokens, std::max(now_ns, it->second.at_ns)};
  }
}

int64_t RequestBudget::ready_at(uid_t uid, int64_t now_ns) const {
  const double tokens = tokens_of(uid, now_ns);
  if (tokens >= 1.0) return now_ns;
  if (rate_ <= 0) return INT64_MAX;
  return now_ns + static_cast<int64_t>(std::ceil((1.0 - tokens) / rate_ * 1e9));
}

void RequestBudget::forget_full(int64_t now_ns) {
  std::erase_if(buckets_, [&](const auto& e) { return tokens_at(e.second, now_ns) >= burst_; });
}

}  // namespace egpu
