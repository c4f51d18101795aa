#include "core/faa/grant_order.h"

#include <cmath>

namespace egpu::faa {

namespace {

// x = one grant's usage over target * tau. Past 30 the level is ~1e-12 of the
// target: cap x there so every weight stays finite for any charge.
double grant_size(double target, Nanos usage_per_grant, Nanos tau) {
  constexpr double kMaxX = 30.0;
  const double x = static_cast<double>(usage_per_grant) / (target * static_cast<double>(tau));
  return x < kMaxX ? x : kMaxX;
}

}  // namespace

double pre_grant_share(double target, Nanos usage_per_grant, Nanos tau) {
  const double x = grant_size(target, usage_per_grant, tau);
  if (x <= 1e-12) return target;
  // expm1 keeps the small-x limit (x / expm1(x) -> 1) exact.
  return target * x / std::expm1(x);
}

}  // namespace egpu::faa
