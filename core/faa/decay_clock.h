// Lazy exponential decay for the FAA's used-time accumulators.
//
// Every accumulator is kept in a shared "scaled" frame: true = stored / scale(),
// where scale() grows as exp(t / tau). Advancing time then costs one exp() for
// the whole GPU instead of one multiply per instance, and adding x true units at
// the current time is `stored += x * scale()`. Ratios of stored values are ratios
// of true values, so orderings never need the true values at all. When the scale
// grows large the caller rescales every stored value by the factor advance()
// returns, which keeps doubles far from overflow however long the agent runs.
#ifndef EGPU_CORE_FAA_DECAY_CLOCK_H
#define EGPU_CORE_FAA_DECAY_CLOCK_H

#include "core/faa/types.h"

namespace egpu::faa {

class DecayClock {
 public:
  DecayClock(Nanos tau, Nanos start);

  // Moves the clock to `now` (earlier times are ignored: time is monotonic).
  // Returns the factor every stored value must be multiplied by: 1.0, except
  // when the frame was renormalised.
  [[nodiscard]] double advance(Nanos now);

  Nanos now() const { return last_; }
  double scale() const { return scale_; }
  // Converts a stored value to its true value at now().
  double to_true(double stored) const { return stored / scale_; }
  // Converts a stored value to its true value at a later time `at`, without
  // moving the clock (for const statistics).
  double to_true_at(double stored, Nanos at) const;

 private:
  double tau_;
  Nanos last_;
  double scale_ = 1.0;
  double log_scale_ = 0.0;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_DECAY_CLOCK_H
