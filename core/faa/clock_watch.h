// ClockWatch: whether this node's gang windows may open with other nodes',
// judged on every reading of the clock discipline rather than once when a
// step starts. chrony can lose its sources, or be stopped, while a job
// runs; windows kept on a clock that no longer agrees with the peers' open
// apart from theirs, and the step's collectives spin through the gap.
//
// Losing alignment is immediate: the clock is wrong now. Regaining it waits
// for `readings_to_regain` good readings in a row, each within a margin of
// the tolerance (3/4 of it), so an error that hovers at the tolerance does
// not move every multi-node gang's windows at each reading.
// Pure: the agent reads the clock and acts on the changes.
#ifndef EGPU_CORE_FAA_CLOCK_WATCH_H
#define EGPU_CORE_FAA_CLOCK_WATCH_H

#include <string>

#include "core/faa/gang_window.h"
#include "core/faa/types.h"

namespace egpu::faa {

class ClockWatch {
 public:
  struct Settings {
    Nanos tolerance = kDefaultAlignTolerance;
    int readings_to_regain = 5;
  };
  enum class Change { kNone, kLost, kRegained };

  explicit ClockWatch(const Settings& settings);

  // The first reading decides at once (a new agent has no history to keep
  // to); later ones change the verdict as described above.
  Change observe(const ClockQuality& reading);

  bool aligned() const { return aligned_; }
  // Why windows are not aligned now (empty when they are): the last bad
  // reading's reason, or how far regaining has come.
  const std::string& reason() const { return reason_; }

 private:
  Settings settings_;
  bool observed_ = false;
  bool aligned_ = false;
  int good_in_a_row_ = 0;
  std::string reason_ = "the clock has not been read yet";
};

// Whether windows placed on epoch `after` open more than `slack` away from
// those placed on `before` (both period boundaries in monotonic time, so
// only their distance modulo `period` matters). A stepped wall clock moves
// the epoch; a slewed one moves monotonic time with it and does not.
bool epoch_moved(Nanos before, Nanos after, Nanos period, Nanos slack);

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_CLOCK_WATCH_H
