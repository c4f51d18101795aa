#include "core/faa/held_time_floor.h"

#include <algorithm>

namespace egpu::faa {

Nanos HeldTimeFloor::settle(Nanos reported, Nanos held, Nanos waking) {
  reported = std::max<Nanos>(reported, 0);
  held = std::max<Nanos>(held, 0);
  waking = std::clamp<Nanos>(waking, 0, held);
  wake_credit_ = std::min(wake_credit_ + params_.wake_credit_rate * static_cast<double>(reported),
                          static_cast<double>(params_.max_wake_credit));
  const double forgiven = std::min(static_cast<double>(waking), wake_credit_);
  wake_credit_ -= forgiven;
  held -= static_cast<Nanos>(forgiven);
  // Reports first pay back what was charged in advance: that device time
  // was charged already.
  const Nanos repaid = std::min(reported, prepaid_);
  prepaid_ -= repaid;
  Nanos charge = reported - repaid;
  owed_exact_ = std::max(
      0.0, owed_exact_ + params_.rate * static_cast<double>(held) - static_cast<double>(charge));
  const double excess = owed_exact_ - static_cast<double>(params_.allowance);
  if (excess >= 1.0) {
    const auto extra = static_cast<Nanos>(excess);
    owed_exact_ -= static_cast<double>(extra);
    prepaid_ += extra;
    floor_charged_ += extra;
    charge += extra;
  }
  owed_ = static_cast<Nanos>(owed_exact_);
  return charge;
}

}  // namespace egpu::faa
