#include "core/faa/deadline_check.h"

#include <algorithm>

namespace egpu::faa {

void DeadlineCheck::reserve(std::size_t instances) {
  const std::size_t horizon = std::min(2 * instances + 4, kMaxHorizon);
  if (buckets_.size() < horizon) buckets_.resize(horizon);
}

void DeadlineCheck::begin(Nanos now, Nanos slice) {
  now_ = now;
  horizon_ = static_cast<Nanos>(buckets_.size()) * slice;
  horizon_end_ = now + horizon_;
  per_slice_ = 1.0 / static_cast<double>(slice);
  std::fill(buckets_.begin(), buckets_.end(), 0);
}

bool DeadlineCheck::feasible() const {
  // The k-th deadline in order must not fall before now + k slices, i.e. at
  // most k - 1 deadlines before that point.
  std::int32_t before = 0;
  for (std::size_t k = 1; k <= buckets_.size(); ++k) {
    before += buckets_[k - 1];
    if (before > static_cast<std::int32_t>(k) - 1) return false;
  }
  return true;
}

}  // namespace egpu::faa
