// The time-slicing model of one simulated GPU, as pure functions on a
// DeviceTimeline with an explicit clock. The driver calls them with the
// device lock held and now = CLOCK_MONOTONIC; unit tests call them on a plain
// in-memory struct with a synthetic clock.
//
// Model: every context has a FIFO of ops. The engine runs one context at a
// time; while others have runnable work it rotates round-robin every
// timeslice, preempting mid-kernel (the kernel keeps its remaining time). A
// context alone runs at 100%. Zero-time ops (event records, satisfied waits,
// empty kernels) complete as soon as they reach the head of their queue.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/layout.h"

namespace egpu::simgpu {

void init_timeline(DeviceTimeline& tl, uint64_t timeslice_ns, uint64_t now_ns);

// Claims a slot for a new context (a free one, else the longest-retired one).
// Returns the slot index, or -1 when every slot is active.
int claim_context(DeviceTimeline& tl, const ProcessIdentity& owner, std::string_view label,
                  uint64_t now_ns);

// Drops the context's queued work and marks it retired; its statistics stay
// readable until the slot is claimed again.
void retire_context(DeviceTimeline& tl, uint32_t slot, uint64_t now_ns);

bool context_matches(const DeviceTimeline& tl, uint32_t slot, uint32_t generation);
uint32_t queued_ops(const ContextSlot& ctx);
bool queue_full(const ContextSlot& ctx);

// Appends an op (its seq is assigned here) and returns the seq. The queue must
// not be full and the timeline must already be advanced to the arrival time.
uint64_t enqueue_op(DeviceTimeline& tl, uint32_t slot, Op op);

// Runs the device from tl.now_ns to to_ns. No op may arrive inside the
// interval: callers advance before they enqueue. Collectives meet on
// `board` (its lock held by the caller); without one they run as kernels.
void advance_timeline(DeviceTimeline& tl, uint64_t to_ns, CollectiveBoard* board = nullptr);

// Whether any queue holds a collective: only then does an advance need the
// board (no op arrives during an advance, so none can appear in it).
bool has_queued_collective(const DeviceTimeline& tl);

bool seq_completed(const DeviceTimeline& tl, uint32_t slot, uint64_t seq);

// How often a waiter looks again while its op waits for a collective's
// peers (their arrival is seen only when this device is evaluated).
inline constexpr uint64_t kCollectivePollNs = 100'000;

// A lower bound of the device time from tl.now_ns until op `seq` of `slot`
// completes: its own remaining work plus what the running context may still
// use of its slice. While a collective before it waits for its peers it is
// kCollectivePollNs instead (which may pass the completion: peers' arrivals
// are seen only at a look). Waiters sleep this long before they look again.
uint64_t completion_lower_bound_ns(const DeviceTimeline& tl, uint32_t slot, uint64_t seq);

// Recomputes derived fields after an interrupted update (a process died
// holding the lock): clamps ring indices, rebuilds pending_mask, fixes running.
void repair_timeline(DeviceTimeline& tl);

}  // namespace egpu::simgpu
