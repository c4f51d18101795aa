// Basic FAA vocabulary shared by every FAA header.
#ifndef EGPU_CORE_FAA_TYPES_H
#define EGPU_CORE_FAA_TYPES_H

#include <cstdint>
#include <limits>

#include "core/util/mode.h"  // an instance's Mode: egpu::Mode

namespace egpu::faa {

// Monotonic time and durations, in nanoseconds. The library never reads a clock:
// the caller passes `now` to every call.
using Nanos = std::int64_t;
// One instance = one Slurm step's share of one physical GPU.
using InstanceId = std::uint32_t;

inline constexpr Nanos kMicrosecond = 1'000;
inline constexpr Nanos kMillisecond = 1'000'000;
inline constexpr Nanos kSecond = 1'000'000'000;
// "No deadline": the caller need not call decide() until something changes.
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_TYPES_H
