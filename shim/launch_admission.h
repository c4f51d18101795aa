// The launch gate's slow path: whatever stands between a launch and the GPU
// when the fast test (this instance holds the slice, the in-flight estimate is
// under the limit, no liveness check due) fails: waiting for the slice, the
// in-flight bound, re-attaching to a restarted agent, and the fail modes.
#pragma once

#include <cstdint>

#include "core/pacing/charge.h"
#include "core/shm/latency_counts.h"
#include "shim/attachment.h"
#include "shim/gate.h"
#include "shim/gpu_binding.h"
#include "shim/process_state.h"

namespace egpu::shim {

// Returns the attachment the launch is accounted to (possibly a new one after
// a re-attach) once it may go; null when the process was orphaned (its
// instance removed while the agent runs on): the launch must be refused.
Attachment* admit_launch(ProcessState& s, GpuBinding& b, Attachment* a);

// Blocks (asking: busy counted) until the process's queued device time on `b`
// is under the limit, polling its streams' markers.
void wait_inflight(GpuBinding& b, const Attachment& a);

// Follows the in-flight bound the agent publishes. It moves while a gang
// window's boundary nears (each look tightens it to the time left), so it is
// read on every launch: a bound seen late lets queued work run past the
// boundary into the next holder's time.
inline void sync_inflight_bound(GpuBinding& b, const Attachment& a) {
  const int64_t limit = shm::inflight_bound(*a.gpu);
  if (limit > 0 && limit != b.pacer().inflight_limit_ns()) b.pacer().set_inflight_limit_ns(limit);
}

// Adds measured or estimated device time to the process's slot.
inline void add_charge(const Attachment& a, const pacing::Charge& c) {
  a.me.add_device_ns(c.total());
}

// Shows the agent that the process launched (ProcSlot::launches: it only asks
// whether the value moved, so no locked add on the fast path).
inline void note_launch(const Attachment& a) {
  a.me.note_launch();
}

// The process went idle at `now`: the burst of work that ends here is a
// latency sample, unless the program reports its own.
inline void count_burst(BurstLatency& burst, const Attachment& a, int64_t now,
                        bool program_reports) {
  const auto ended = burst.ended(now, a.me.throttled_ns());
  if (!ended || program_reports) return;
  shm::add_latency_sample(*a.instance, ended->span_ns);
  shm::add_burst(*a.instance, ended->span_ns, ended->gate_ns);
}

// Publishes the process's queued device time (the agent drains it at a
// handover and sizes its long-kernel rule on it).
inline void publish_inflight(const Attachment& a, int64_t queued_ns) {
  a.me.set_inflight(queued_ns);
}

}  // namespace egpu::shim
