// ClockWatch: whether this node's gang windows may open with other nodes',
// judged on every reading of the clock discipline rather than once when a
// step starts. chrony can lose its sources, or be stopped, while a job
// runs; windows kept on a clock that no longer agrees with the peers' open
// apart from theirs, and the step's collectives spin through the gap.
//
// A reading is bad when the clock is unsynchronized, its estimated error is
// past the tolerance, or the discipline has stopped updating it: esterror
// keeps the last value a dead chronyd wrote, and the kernel only declares
// the clock unsynchronized once maxerror reaches 16 s, some nine hours
// later. maxerror grows by 500 us a second between updates; a reading on
// that line from the last update for longer than `stale_after` means none
// came (the default is twice chrony's longest default polling interval).
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
    Nanos stale_after = 2100 * kSecond;
  };
  enum class Change { kNone, kLost, kRegained };

  explicit ClockWatch(const Settings& settings);

  // A reading taken at `now` (monotonic). The first decides at once (a new
  // agent has no history to keep to); later ones change the verdict as
  // described above.
  Change observe(const ClockQuality& reading, Nanos now);

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
  // The last update of maxerror seen: when, and the value it was set to.
  Nanos updated_at_ = 0;
  Nanos updated_max_error_ = 0;
  bool update_seen_ = false;

  // The reading judged on its own, staleness included.
  Status judge(const ClockQuality& reading, Nanos now);
};

// Whether windows placed on epoch `after` open more than `slack` away from
// those placed on `before` (both period boundaries in monotonic time, so
// only their distance modulo `period` matters). A stepped wall clock moves
// the epoch; a slewed one moves monotonic time with it and does not.
bool epoch_moved(Nanos before, Nanos after, Nanos period, Nanos slack);

// The epoch gang windows are placed on after a new read of it: `previous`
// (0: none yet, then `read` whatever its quality), unless `read` is dated
// within `read_slack` (its `uncertainty`) and has moved past `moved_slack`.
// Windows then stay put through reads that a busy host preempted, and
// through the jitter of good ones: they move only when the wall clock was
// stepped, however often the agent re-plans its gangs.
Nanos keep_or_move_epoch(Nanos previous, Nanos read, Nanos uncertainty, Nanos read_slack,
                         Nanos period, Nanos moved_slack);

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_CLOCK_WATCH_H
