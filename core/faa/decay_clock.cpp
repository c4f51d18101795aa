#include "core/faa/decay_clock.h"

#include <cmath>

namespace egpu::faa {
namespace {

// Renormalise once the scale passes e^30 (~1e13): about every 15 s at the
// default tau, far below where a double loses the small charges added to it.
constexpr double kMaxLogScale = 30.0;

}  // namespace

DecayClock::DecayClock(Nanos tau, Nanos start) : tau_(static_cast<double>(tau)), last_(start) {}

double DecayClock::advance(Nanos now) {
  if (now <= last_) return 1.0;
  const double exponent = static_cast<double>(now - last_) / tau_;
  last_ = now;
  const double log_scale = log_scale_ + exponent;
  if (log_scale < kMaxLogScale) {
    scale_ *= std::exp(exponent);
    log_scale_ = log_scale;
    return 1.0;
  }
  // Fold the whole scale (and this step's decay) into the stored values: their
  // new frame starts at scale 1 at `now`. Very long idle steps underflow to 0,
  // which is the right answer.
  scale_ = 1.0;
  log_scale_ = 0.0;
  return std::exp(-log_scale);
}

double DecayClock::to_true_at(double stored, Nanos at) const {
  const double true_now = to_true(stored);
  if (at <= last_) return true_now;
  return true_now * std::exp(-static_cast<double>(at - last_) / tau_);
}

}  // namespace egpu::faa
