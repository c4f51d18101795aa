// LatencyObjective: "p99:40ms", what a latency-critical instance asks for
// (--egpu-slo, egpuctl slo). One parser for the SPANK option, egpuctl and the
// control protocol, so a value means the same everywhere and is refused with
// the same words.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace egpu::slo {

struct LatencyObjective {
  // The percentile in thousandths of a percent (p99 = 99000, p99.9 = 99900):
  // an integer, so the wire and the page carry it exactly.
  uint32_t percentile_milli = 0;
  int64_t target_ns = 0;

  double quantile() const { return percentile_milli / 100'000.0; }
  bool operator==(const LatencyObjective&) const = default;
};

inline constexpr int64_t kMinTargetNs = 1'000'000;          // 1 ms
inline constexpr int64_t kMaxTargetNs = 600'000'000'000LL;  // 10 min

// "pP:T" with P in (0, 100) (at most 3 decimals) and T a positive number
// with a unit (us, ms or s) in [1ms, 600s]; "off" (any case) is nullopt.
// The error names what is wrong; callers prefix what they were reading.
Result<std::optional<LatencyObjective>> parse_objective(std::string_view text);

// "p99:40ms", as parse_objective reads it back; "off" for nullopt.
std::string to_string(const std::optional<LatencyObjective>& objective);

}  // namespace egpu::slo
