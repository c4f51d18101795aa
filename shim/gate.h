// The slice gate's slow path: waiting until this instance holds the GPU's
// slice, and telling a live agent from a dead one. Free of CUDA: it works on
// the shared pages only (futex on InstancePage.grant_word, the wake channel to ask).
#pragma once

#include <cstdint>
#include <functional>

#include "shim/attachment.h"

namespace egpu::shim {

// Longest single futex sleep: liveness is re-checked at least this often.
inline constexpr int64_t kMaxFutexWaitNs = 50'000'000;

enum class SliceWait {
  kGranted,       // this instance holds the slice
  kAgentDead,     // the heartbeat stopped: apply the fail mode
  kEpochChanged,  // the agent restarted: re-attach
  kInstanceGone,  // the agent removed the instance (its step ended): orphaned
};

// Blocks (counted in ProcSlot.busy, the time in throttled_ns) until one of the
// outcomes above. Asks the agent once through the wake channel.
// `drain` (optional) polls this process's queued work and returns what is
// left: while some is, the wait wakes every kDrainPollNs to publish it, so
// the agent can hand the slice over as soon as this tail is done.
// `kick`: ask the agent to decide now (false for a process that held the
// slice until the agent's last decision: where that decision gave the slice
// to another instance, its end is a look that sees this thread asking).
// Where nobody holds the slice it asks whatever `kick` says: the agent may
// have found nobody asking and planned no look.
SliceWait wait_for_slice(const Attachment& a, const std::function<int64_t()>& drain = {},
                         bool kick = true);
inline constexpr int64_t kDrainPollNs = 100'000;

// Sleeps up to `ns` (at most kMaxFutexWaitNs) on the grant word, waking early
// when this instance is granted: used while duty-cycling without an agent.
void sleep_on_grant(const Attachment& a, int64_t ns);

// A synchronising call returned with nothing queued: the process may be idle.
// Publishes when, and if another instance waits for the slice while this one
// holds it or the GPU drains, asks the agent to look (so an idle holder
// yields, and a drain ends, without a poll's delay).
void note_idle(const Attachment& a);
// This process's queued tail went from `before` to `after` ns: while the GPU
// drains (no holder), falling to the page's handover tail kicks the agent.
void note_tail(const Attachment& a, int64_t before, int64_t after);

}  // namespace egpu::shim
