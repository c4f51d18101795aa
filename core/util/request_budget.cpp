#include "core/util/request_budget.h"

#include <algorithm>

namespace egpu {
namespace {

// Entries kept before the full ones are dropped: users are keyed as the
// control server counts them (uids that own no instance count as one), so
// this is reached only on a node of thousands of tenants.
constexpr size_t kForgetAbove = 4096;

}  // namespace

bool RequestBudget::may_serve(uid_t uid, int64_t now_ns) const {
  auto it = buckets_.find(uid);
  return it == buckets_.end() || it->second.holds(1.0, now_ns);  // none: full
}

void RequestBudget::charge(uid_t uid, double cost, int64_t now_ns) {
  auto it = buckets_.find(uid);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kForgetAbove) forget_full(now_ns);
    it = buckets_.emplace(uid, TokenBucket(rate_ / 1e9, burst_, now_ns)).first;
  }
  it->second.spend(std::max(1.0, cost), now_ns);
}

int64_t RequestBudget::ready_at(uid_t uid, int64_t now_ns) const {
  auto it = buckets_.find(uid);
  return it == buckets_.end() ? now_ns : it->second.ready_at(1.0, now_ns);
}

void RequestBudget::forget_full(int64_t now_ns) {
  std::erase_if(buckets_, [&](const auto& e) { return e.second.full(now_ns); });
}

}  // namespace egpu
