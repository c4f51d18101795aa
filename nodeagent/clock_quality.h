// What the kernel says of this node's clock discipline (chrony, ntpd or PTP
// set it through adjtimex): whether the clock is synchronized and its
// estimated error. Gang windows of a step on several nodes open together
// only as far as the nodes' clocks agree.
#pragma once

#include "core/faa/gang_window.h"

namespace egpu::agent {

faa::ClockQuality read_clock_quality();

// Monotonic time of a wall-clock boundary: the latest instant at or before
// now where CLOCK_REALTIME was a multiple of `period`. Windows placed from
// it open at the same wall-clock time on every node.
// `uncertainty`, when given, gets how far apart the monotonic reads that
// date the wall-clock read were (the epoch is off by up to half of it).
faa::Nanos wall_aligned_epoch(faa::Nanos period, faa::Nanos* uncertainty = nullptr);

}  // namespace egpu::agent
