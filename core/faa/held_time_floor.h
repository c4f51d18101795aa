// HeldTimeFloor: what an instance is charged when its own reports of device
// time cannot be trusted. Device time comes from the job's shims, through a
// page the job can write: a holder that says it is busy but reports no device
// time would never be charged and would win every decision. So the wall time
// it holds the slice while others wait (and shows activity) sets a floor:
// `rate` of that time must be covered by reported device time; what falls
// short by more than `allowance` is charged anyway, as prepaid time that
// later reports pay back first (an honest long kernel reports its time when
// it ends: over its run it is charged in advance, in total exactly once).
//
// A holder woken from the gate on a busy host runs some time after its
// grant, and until it runs its page still says it is blocked: from the page
// that is a liar. Held time before its first launch in a grant is therefore
// forgiven out of a credit of half the device time it reported: an honest
// late riser loses only the time it did not run; a liar that reports nothing
// has no credit, and one that reports time it did not use pays for that time,
// so lying buys at most 1.5x of what it pays for.
#ifndef EGPU_CORE_FAA_HELD_TIME_FLOOR_H
#define EGPU_CORE_FAA_HELD_TIME_FLOOR_H

#include "core/faa/types.h"

namespace egpu::faa {

struct HeldTimeFloorParams {
  // Below 1 so that an honest holder's small gaps (its first launch after a
  // grant, a sync returning) are never charged; a liar then gets at most
  // 1/rate of its share.
  double rate = 0.95;
  // Shortfall tolerated before charging: covers the lag of honest reports
  // (device time is reported when the work completes).
  Nanos allowance = 100 * kMillisecond;
  // Waking time forgiven per nanosecond reported, and the most banked.
  double wake_credit_rate = 0.5;
  Nanos max_wake_credit = 50 * kMillisecond;
};

class HeldTimeFloor {
 public:
  explicit HeldTimeFloor(HeldTimeFloorParams params = {}) : params_(params) {}

  // One scan's worth: `reported` device time newly reported (>= 0), `held`
  // wall time the instance held the slice while others asked (>= 0), of
  // which `waking` before it first launched in this grant. Returns what to
  // charge now.
  Nanos settle(Nanos reported, Nanos held, Nanos waking = 0);

  Nanos owed() const { return owed_; }
  Nanos prepaid() const { return prepaid_; }
  Nanos wake_credit() const { return static_cast<Nanos>(wake_credit_); }
  // All charged on the floor so far (for status: a non-zero figure means the
  // instance's reports fell short of the time it held).
  Nanos floor_charged() const { return floor_charged_; }

 private:
  HeldTimeFloorParams params_;
  double owed_exact_ = 0;  // held time x rate not yet covered by charges
  Nanos owed_ = 0;
  Nanos prepaid_ = 0;  // charged on the floor, not yet matched by reports
  Nanos floor_charged_ = 0;
  double wake_credit_ = 0;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_HELD_TIME_FLOOR_H
