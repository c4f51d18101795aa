// What the scheduler reports for `egpuctl status` and the agent's metrics.
#ifndef EGPU_CORE_FAA_STATS_H
#define EGPU_CORE_FAA_STATS_H

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/faa/types.h"

namespace egpu::faa {

struct InstanceStats {
  InstanceId id = 0;
  double target = 0.0;
  Mode mode = Mode::kBurst;
  // Decayed share of the GPU's time it ran (time constant tau), and its
  // deviation as the scheduler reckons it: the history join() and resizes
  // credit it (a newcomer starts at 0, a resize keeps it) less its target.
  double achieved = 0.0;
  double deviation = 0.0;
  bool asking = false;
  bool holding = false;
  // Total device time charged since join.
  Nanos charged = 0;
  // Time spent asking without holding the slice, and the longest such stretch
  // (both include a wait still in progress).
  Nanos throttled = 0;
  Nanos longest_wait = 0;
  std::uint64_t grants = 0;
  // Cap instances only: tokens now (may be negative after a long kernel).
  Nanos cap_tokens = 0;
};

struct GpuStats {
  std::optional<InstanceId> holder;
  // When the current grant started and when it ends at the latest.
  Nanos holder_since = 0;
  Nanos holder_until = 0;
  // Decayed share of time the GPU was charged to anyone (time constant tau).
  double utilisation = 0.0;
  // Sum of the targets of all instances (unallocated = 1 - allocated).
  double allocated = 0.0;
  std::size_t instances = 0;
  std::size_t asking = 0;
  std::uint64_t grants = 0;
  std::uint64_t preemptions = 0;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_STATS_H
