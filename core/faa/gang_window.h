// Gang windows: the instances of one step on several GPUs hold their slices
// at the same time, so a collective (NCCL's kernels spin until every peer
// runs its part) finds its peers running instead of burning its own share
// waiting for their next slices.
//
// A gang member on a GPU gets a window of `length` every `period`, at the
// same `offset` on every GPU of the gang. Windows are placed on a common
// clock: `epoch` is a boundary of that clock expressed in this node's
// monotonic time, so nodes whose clocks agree open a gang's windows together
// without talking to each other. Inside its window the member is the only
// one that may ask on its GPU; outside, it asks only when nobody else does
// (idle time is not taken from anyone). Co-tenants share the rest by FAA.
// Pure: no clocks, no I/O.
#ifndef EGPU_CORE_FAA_GANG_WINDOW_H
#define EGPU_CORE_FAA_GANG_WINDOW_H

#include <cstdint>
#include <optional>
#include <vector>

#include "core/faa/types.h"
#include "core/util/result.h"

namespace egpu::faa {

inline constexpr Nanos kDefaultGangPeriod = 20 * kMillisecond;

struct GangWindow {
  Nanos epoch = 0;  // a period boundary, in this node's monotonic time
  Nanos period = kDefaultGangPeriod;
  Nanos offset = 0;  // windows are [epoch + k * period + offset, ... + length)
  Nanos length = 0;
  // The gang on this node (its members share skip decisions: gang_grants.h)
  // and whether it spans nodes.
  uint64_t gang = 0;
  bool across_nodes = false;
  bool operator==(const GangWindow&) const = default;
};

// Fails naming the field: period > 0, 0 < length <= period, 0 <= offset and
// offset + length <= period.
Status validate(const GangWindow& window);

// The window open at `now` ([start, end) holds now), or else the next one.
struct WindowPhase {
  bool open = false;
  Nanos start = 0;
  Nanos end = 0;
};
WindowPhase window_at(const GangWindow& window, Nanos now);

// A window's length for a member of `share` (units / 100) of its GPU.
Nanos window_length(double share, Nanos period);

// One gang to place: the GPUs (node-local indices) its members hold and its
// window length (the same on all of them: its members have the same share).
struct GangRequest {
  std::vector<uint32_t> gpus;
  Nanos length = 0;
  // The offset it had: kept where it still fits, before any gang without one
  // is placed (so a gang that arrives later cannot move it).
  std::optional<Nanos> keep;
};

// Offsets within one period such that no two gangs sharing a GPU have
// overlapping windows: first the gangs that keep their offset, in the order
// given, where it still fits; then the rest first fit in the order given
// (callers order by step id, so every node of a multi-node step places it
// the same way when it sees the same gangs). nullopt for a gang that does
// not fit: its members are sliced independently.
std::vector<std::optional<Nanos>> place_gangs(const std::vector<GangRequest>& gangs, Nanos period);

// What the node's clock discipline (chrony, ntpd, PTP through the kernel)
// says of this clock's error against the common time.
struct ClockQuality {
  bool synchronized = false;  // the kernel's STA_UNSYNC bit is clear
  Nanos error_bound = 0;      // estimated error (adjtimex esterror)
  // Maximum error (adjtimex maxerror): the kernel adds 500 us to it every
  // second until the discipline next sets it, so its growth tells how long
  // ago that was. 0: not known (a clock the nodes share).
  Nanos max_error = 0;
};

// Windows of a step on several nodes open together only as far as the
// nodes' clocks agree: an error of e shifts a window by up to e against a
// peer's, and the peers' collectives spin that long. OK when the clock is
// synchronized and its error is within `tolerance`; otherwise the error says
// why, for the agent's status (its windows stay on its own clock: a node's
// GPUs are aligned whatever the clock).
inline constexpr Nanos kDefaultAlignTolerance = 500 * kMicrosecond;
Status can_align_across_nodes(const ClockQuality& clock, Nanos tolerance);

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_GANG_WINDOW_H
