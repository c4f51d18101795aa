// The ordering key of FAA decisions.
//
// Lowest deviation D = achieved - target is biased when read at grant time:
// every grant lifts an instance's decayed share by usage/tau and it then decays,
// so an instance served exactly at its target has a sawtooth share whose LOW
// point (where it wins the next grant) lies below the target. Comparing raw D
// therefore favours small targets and large grants (measured over 2 s at 10 ms
// slices: 1/99 came out 2/98, 90/10 came out 89/11). We instead compare each
// instance's share with the low point its own exact service would have, the
// "pre-grant share" below, and grant the lowest ratio share / pre-grant share:
// the instance that is most overdue. With equal targets and grant sizes this
// is exactly lowest D.
//
// For an instance with target t granted u of device time every u/t (periodic
// service at exactly its target), the decayed share just before a grant is
//   L = t * x / (e^x - 1),  x = u / (t * tau),
// which tends to t - u/(2 tau) for small x (the linear sawtooth) and stays right
// when one grant is a large part of tau (small targets).
#ifndef EGPU_CORE_FAA_GRANT_ORDER_H
#define EGPU_CORE_FAA_GRANT_ORDER_H

#include "core/faa/types.h"

namespace egpu::faa {

// L above; target in (0, 1], usage_per_grant >= 0, tau > 0.
double pre_grant_share(double target, Nanos usage_per_grant, Nanos tau);

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_GRANT_ORDER_H
