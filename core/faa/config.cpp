#include "core/faa/config.h"

#include <cmath>
#include <string>

namespace egpu::faa {
namespace {

std::string millis(Nanos ns) {
  // Whole milliseconds print without a fraction; others keep three decimals.
  if (ns % kMillisecond == 0) return std::to_string(ns / kMillisecond) + " ms";
  const double ms = static_cast<double>(ns) / static_cast<double>(kMillisecond);
  std::string text = std::to_string(ms);
  return text.substr(0, text.find('.') + 4) + " ms";
}

}  // namespace

Status Config::validate() const {
  constexpr Nanos kMinSlice = 1 * kMillisecond;
  constexpr Nanos kMaxSlice = 50 * kMillisecond;
  constexpr Nanos kMaxTau = 60 * kSecond;
  if (slice < kMinSlice || slice > kMaxSlice) {
    return Error{"slice " + millis(slice) + " is out of range: it must be 1-50 ms"};
  }
  // Below a few slices the decayed share swings by more than a slice's worth
  // per grant and ordering by it stops meaning anything.
  if (tau < 5 * slice || tau > kMaxTau) {
    return Error{"tau " + millis(tau) + " is out of range: it must be at least 5 slices (" +
                 millis(5 * slice) + ") and at most 60000 ms"};
  }
  if (!std::isfinite(preempt_threshold) || preempt_threshold <= 0.0 || preempt_threshold > 1.0) {
    return Error{"preempt_threshold " + std::to_string(preempt_threshold) +
                 " is out of range: it must be in (0, 1] (a fraction of the GPU)"};
  }
  if (min_hold < 0 || min_hold > slice) {
    return Error{"min_hold " + millis(min_hold) + " is out of range: it must be 0 to the slice (" +
                 millis(slice) + ")"};
  }
  if (min_cap_grant < kMicrosecond || min_cap_grant > slice) {
    return Error{"min_cap_grant " + millis(min_cap_grant) +
                 " is out of range: it must be 0.001 ms to the slice (" + millis(slice) + ")"};
  }
  return Status::Ok();
}

}  // namespace egpu::faa
