// The anti-starvation check behind FAA's bounded wait.
//
// Every waiting instance has a deadline: the latest time its next grant may
// start (it started waiting + its patience). Before the scheduler gives the
// next slice to its preferred instance X, it asks: if X takes a full slice
// now, can the others still all start by their deadlines, one slice each in
// earliest-deadline order? That holds iff, for every k >= 1, fewer than k
// deadlines fall before now + k slices. Counting deadlines per slice-wide
// bucket answers it in O(n) without sorting or allocating.
#ifndef EGPU_CORE_FAA_DEADLINE_CHECK_H
#define EGPU_CORE_FAA_DEADLINE_CHECK_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/faa/types.h"

namespace egpu::faa {

class DeadlineCheck {
 public:
  static constexpr std::size_t kMaxHorizon = 64;

  // Makes room for this many deadlines (allocates; call outside decisions).
  void reserve(std::size_t instances);

  // Starts a check for slices of `slice` starting at `now`.
  void begin(Nanos now, Nanos slice);
  // An instance whose next grant must start by `deadline` and, after each
  // grant, again within `period` (its slice plus its patience).
  void add(Nanos deadline, Nanos period) { count(deadline, period, 1); }
  // Takes back what add() with the same arguments counted.
  void remove(Nanos deadline, Nanos period) { count(deadline, period, -1); }
  // True if one slice given to someone else first leaves every added deadline
  // reachable.
  bool feasible() const;

 private:
  // Adds `delta` at every deadline of the instance inside the horizon. Inline:
  // a decision calls it once per waiting instance.
  void count(Nanos deadline, Nanos period, std::int32_t delta) {
    if (deadline >= horizon_end_) return;
    // A deadline already past is due now; its next one follows from now.
    for (Nanos ahead = deadline > now_ ? deadline - now_ : 0; ahead < horizon_; ahead += period) {
      // The nudge keeps exact multiples of the slice in their own bucket;
      // whole nanoseconds off a multiple are 1e-7 slices or more away.
      buckets_[static_cast<std::size_t>(static_cast<double>(ahead) * per_slice_ + 1e-9)] += delta;
    }
  }

  Nanos now_ = 0;
  // Deadlines from now + horizon_ on cannot be at risk yet: not counted.
  Nanos horizon_ = 0;
  Nanos horizon_end_ = 0;
  // 1 / slice: a multiply instead of a 64-bit division per deadline.
  double per_slice_ = 1.0;
  // buckets_[b] counts deadlines in [now + b*slice, now + (b+1)*slice); late
  // ones count in bucket 0. The horizon is at most kMaxHorizon slices: a
  // crunch further out can still be avoided by the decisions in between.
  std::vector<std::int32_t> buckets_;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_DEADLINE_CHECK_H
