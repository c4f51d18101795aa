#include "model/timeline.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include "model/collectives.h"

namespace egpu::simgpu {
namespace {

uint64_t bit(uint32_t slot) {
  return uint64_t{1} << slot;
}

Op& head_op(ContextSlot& c) {
  return c.ops[c.head % kQueueDepth];
}
const Op& head_op(const ContextSlot& c) {
  return c.ops[c.head % kQueueDepth];
}

bool is_timed(uint32_t kind) {
  return kind == static_cast<uint32_t>(OpKind::kKernel) ||
         kind == static_cast<uint32_t>(OpKind::kCopy);
}

bool wait_satisfied(const DeviceTimeline& tl, const Op& op) {
  if (op.ref_slot >= kMaxContexts) return true;
  const ContextSlot& target = tl.contexts[op.ref_slot];
  // A context that went away can never complete more work: don't wait for it.
  if (target.state != static_cast<uint32_t>(ContextState::kActive) ||
      target.generation != op.ref_generation) {
    return true;
  }
  return target.completed_seq >= op.wait_seq;
}

// Whether another context holds the engine with work to do. A context's
// commands (event records included) are processed only while it is scheduled,
// as a time-sliced GPU does: an event recorded on an idle stream of a waiting
// context is stamped when that context gets the engine, not at once.
bool engine_taken_by_other(const DeviceTimeline& tl, uint32_t slot) {
  const int r = tl.running;
  if (r < 0 || static_cast<uint32_t>(r) == slot) return false;
  if ((tl.pending_mask & bit(static_cast<uint32_t>(r))) == 0) return false;
  return head_op(tl.contexts[r]).kind != static_cast<uint32_t>(OpKind::kWait);
}

bool is_collective(const Op& op) {
  return op.kind == static_cast<uint32_t>(OpKind::kCollective);
}

bool released(const Op& op) {
  return op.group_phase == static_cast<uint32_t>(CollectivePhase::kReleased);
}

bool head_is_instant(const DeviceTimeline& tl, const ContextSlot& c, uint32_t slot,
                     const CollectiveBoard* board) {
  const Op& op = head_op(c);
  if (op.kind == static_cast<uint32_t>(OpKind::kWait)) return wait_satisfied(tl, op);
  // A collective must first hold the engine to arrive (without a board it
  // is a plain kernel).
  if (is_collective(op)) return op.remaining_ns == 0 && (released(op) || board == nullptr);
  if (is_timed(op.kind)) return op.remaining_ns == 0;
  // Event records and anything unknown take no device time, but need the engine.
  return !engine_taken_by_other(tl, slot);
}

// Ordered so that an interrupted completion is harmless: the stamp and
// completed_seq are written before the op leaves the queue.
void complete_head(DeviceTimeline& tl, uint32_t slot, uint64_t t, CollectiveBoard* board) {
  ContextSlot& c = tl.contexts[slot];
  const Op& op = head_op(c);
  if (is_collective(op) && board != nullptr && op.group != 0 && released(op)) {
    depart(*board, op.group);
  }
  if (op.kind == static_cast<uint32_t>(OpKind::kEventRecord) && op.ref_slot < kEventSlots) {
    c.events[op.ref_slot] = EventStamp{op.seq, t};
  }
  c.completed_seq = op.seq;
  ++c.head;
  if (c.head == c.tail) tl.pending_mask &= ~bit(slot);
}

// Completes zero-time ops at the heads of all queues; repeats because one
// completion can satisfy another context's wait.
void drain_instant_ops(DeviceTimeline& tl, uint64_t t, CollectiveBoard* board) {
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint64_t mask = tl.pending_mask; mask != 0; mask &= mask - 1) {
      const auto slot = static_cast<uint32_t>(std::countr_zero(mask));
      ContextSlot& c = tl.contexts[slot];
      while (c.head != c.tail && head_is_instant(tl, c, slot, board)) {
        complete_head(tl, slot, t, board);
        progress = true;
      }
    }
  }
}

// Contexts whose head op needs the engine (after drain_instant_ops, a wait at
// the head is an unsatisfied one and blocks its context).
uint64_t runnable_mask(const DeviceTimeline& tl) {
  uint64_t runnable = 0;
  for (uint64_t mask = tl.pending_mask; mask != 0; mask &= mask - 1) {
    const auto slot = static_cast<uint32_t>(std::countr_zero(mask));
    if (head_op(tl.contexts[slot]).kind != static_cast<uint32_t>(OpKind::kWait)) {
      runnable |= bit(slot);
    }
  }
  return runnable;
}

// The first slot in `mask` after `after`, cyclically (round-robin order).
int next_in_ring(uint64_t mask, int after) {
  if (mask == 0) return -1;
  const int start = after + 1;
  const uint64_t upper = (start >= 64 || start < 0) ? 0 : mask & (~uint64_t{0} << start);
  return std::countr_zero(upper != 0 ? upper : mask);
}

// Device time the queue of `c` holds up to op `seq` (all of it for seq = ~0),
// stopping early once it reaches `cap`.
uint64_t queued_work_ns(const ContextSlot& c, uint64_t seq, uint64_t cap) {
  uint64_t total = 0;
  for (uint64_t i = c.head; i != c.tail && total < cap; ++i) {
    const Op& op = c.ops[i % kQueueDepth];
    if (op.seq > seq) break;
    if (is_timed(op.kind) || is_collective(op)) total += op.remaining_ns;
  }
  return total;
}

// Whether op `seq` waits behind (or is) a collective whose group is not
// complete yet: its completion depends on other devices.
bool waits_for_peers(const ContextSlot& c, uint64_t seq) {
  for (uint64_t i = c.head; i != c.tail; ++i) {
    const Op& op = c.ops[i % kQueueDepth];
    if (op.seq > seq) break;
    if (is_collective(op) && !released(op)) return true;
  }
  return false;
}

// The context `cur` takes the engine at `t`: a collective at its head
// spins from now (what it held before a preemption is not credited).
void take_engine(DeviceTimeline& tl, int cur, uint64_t t) {
  tl.running = cur;
  tl.slice_used_ns = 0;
  Op& op = head_op(tl.contexts[cur]);
  if (is_collective(op)) op.spin_since_ns = t;
}

// Runs the collective at the head of `cur` from `t` on: arrives, and when
// its group is complete becomes a plain kernel credited with the engine
// time it held since the release. Returns how long it spins now (0: it was
// released, the caller runs it as a kernel), at most `limit`.
uint64_t run_collective(Op& op, CollectiveBoard& board, uint64_t t, uint64_t limit) {
  if (op.group_phase == static_cast<uint32_t>(CollectivePhase::kNotArrived)) {
    switch (arrive(board, op.group, op.group_size, t)) {
      case Arrival::kArrived:
        break;
      case Arrival::kBoardFull:
        return limit;  // spins, and tries again at the next step
      case Arrival::kKeyReused:
        op.group = 0;  // alone: never departs an entry it has no part in
        op.group_phase = static_cast<uint32_t>(CollectivePhase::kReleased);
        return 0;
    }
    op.group_phase = static_cast<uint32_t>(CollectivePhase::kWaiting);
    op.spin_since_ns = t;
  }
  const std::optional<uint64_t> at = released_at(board, op.group);
  if (at && *at <= t) {
    const uint64_t held = t - std::max(*at, std::min(op.spin_since_ns, t));
    op.remaining_ns -= std::min(op.remaining_ns, held);
    op.group_phase = static_cast<uint32_t>(CollectivePhase::kReleased);
    return 0;
  }
  // Complete in this device's future (a peer's device ran ahead): spin to it.
  return at ? std::min(limit, *at - t) : limit;
}

}  // namespace

void init_timeline(DeviceTimeline& tl, uint64_t timeslice_ns, uint64_t now_ns) {
  tl.now_ns = now_ns;
  tl.busy_ns = 0;
  tl.timeslice_ns = std::max<uint64_t>(timeslice_ns, 1);
  tl.slice_used_ns = 0;
  tl.pending_mask = 0;
  tl.running = -1;
}

int claim_context(DeviceTimeline& tl, const ProcessIdentity& owner, std::string_view label,
                  uint64_t now_ns) {
  int chosen = -1;
  for (uint32_t s = 0; s < kMaxContexts && chosen < 0; ++s) {
    if (tl.contexts[s].state == static_cast<uint32_t>(ContextState::kFree)) {
      chosen = static_cast<int>(s);
    }
  }
  if (chosen < 0) {  // reuse the slot retired longest ago
    for (uint32_t s = 0; s < kMaxContexts; ++s) {
      const ContextSlot& c = tl.contexts[s];
      if (c.state == static_cast<uint32_t>(ContextState::kRetired) &&
          (chosen < 0 || c.retired_ns < tl.contexts[chosen].retired_ns)) {
        chosen = static_cast<int>(s);
      }
    }
  }
  if (chosen < 0) return -1;
  ContextSlot& c = tl.contexts[chosen];
  c.generation += 1;
  c.owner = owner;
  std::memset(c.label, 0, sizeof c.label);
  std::memcpy(c.label, label.data(), std::min<size_t>(label.size(), sizeof c.label - 1));
  c.busy_ns = 0;
  c.next_seq = 1;
  c.completed_seq = 0;
  c.head = 0;
  c.tail = 0;
  c.created_ns = now_ns;
  c.retired_ns = 0;
  // Stale event stamps need no clearing: a stamp is read only after its record
  // op has completed, which rewrites it.
  c.state = static_cast<uint32_t>(ContextState::kActive);  // last: publishes the slot
  return chosen;
}

void retire_context(DeviceTimeline& tl, uint32_t slot, uint64_t now_ns) {
  if (slot >= kMaxContexts) return;
  ContextSlot& c = tl.contexts[slot];
  c.state = static_cast<uint32_t>(ContextState::kRetired);
  c.retired_ns = now_ns;
  c.head = c.tail;
  if (c.next_seq > 0) c.completed_seq = c.next_seq - 1;
  tl.pending_mask &= ~bit(slot);
}

bool context_matches(const DeviceTimeline& tl, uint32_t slot, uint32_t generation) {
  return slot < kMaxContexts &&
         tl.contexts[slot].state == static_cast<uint32_t>(ContextState::kActive) &&
         tl.contexts[slot].generation == generation;
}

uint32_t queued_ops(const ContextSlot& ctx) {
  return static_cast<uint32_t>(ctx.tail - ctx.head);
}

bool queue_full(const ContextSlot& ctx) {
  return ctx.tail - ctx.head >= kQueueDepth;
}

uint64_t enqueue_op(DeviceTimeline& tl, uint32_t slot, Op op) {
  ContextSlot& c = tl.contexts[slot];
  op.seq = c.next_seq;
  op.group_phase = static_cast<uint32_t>(CollectivePhase::kNotArrived);
  op.spin_since_ns = 0;
  c.ops[c.tail % kQueueDepth] = op;  // written before tail publishes it
  c.next_seq = op.seq + 1;
  ++c.tail;
  tl.pending_mask |= bit(slot);
  return op.seq;
}

void advance_timeline(DeviceTimeline& tl, uint64_t to_ns, CollectiveBoard* board) {
  const uint64_t to = std::max(to_ns, tl.now_ns);  // device time never runs backwards
  const uint64_t slice = std::max<uint64_t>(tl.timeslice_ns, 1);
  uint64_t t = tl.now_ns;
  for (;;) {
    drain_instant_ops(tl, t, board);
    const uint64_t runnable = runnable_mask(tl);
    if (runnable == 0) break;  // idle until `to`
    int cur = tl.running;
    if (cur < 0 || (runnable & bit(static_cast<uint32_t>(cur))) == 0) {
      cur = next_in_ring(runnable, tl.running);
      take_engine(tl, cur, t);
    }
    uint64_t others = runnable & ~bit(static_cast<uint32_t>(cur));
    if (others != 0 && tl.slice_used_ns >= slice) {  // slice expired: rotate
      cur = next_in_ring(others, cur);
      take_engine(tl, cur, t);
      others = runnable & ~bit(static_cast<uint32_t>(cur));
    }
    if (t >= to) break;
    ContextSlot& c = tl.contexts[cur];
    Op& op = head_op(c);
    uint64_t limit = to - t;
    if (others != 0) limit = std::min(limit, slice - tl.slice_used_ns);
    uint64_t step;
    if (is_collective(op) && !released(op) && board != nullptr) {
      step = run_collective(op, *board, t, limit);  // spinning: no progress of its own
      if (step == 0) continue;                      // released: runs as a kernel
    } else {
      step = std::min(op.remaining_ns, limit);
      op.remaining_ns -= step;
    }
    t += step;
    c.busy_ns += step;
    tl.busy_ns += step;
    tl.slice_used_ns += step;
    if (others == 0) tl.slice_used_ns %= slice;  // alone, its slice simply renews
    if (op.remaining_ns == 0 && (!is_collective(op) || released(op) || board == nullptr)) {
      complete_head(tl, static_cast<uint32_t>(cur), t, board);
    }
  }
  tl.now_ns = to;
}

bool has_queued_collective(const DeviceTimeline& tl) {
  for (uint64_t mask = tl.pending_mask; mask != 0; mask &= mask - 1) {
    const ContextSlot& c = tl.contexts[std::countr_zero(mask)];
    for (uint64_t i = c.head; i != c.tail; ++i) {
      if (is_collective(c.ops[i % kQueueDepth])) return true;
    }
  }
  return false;
}

bool seq_completed(const DeviceTimeline& tl, uint32_t slot, uint64_t seq) {
  return slot >= kMaxContexts || tl.contexts[slot].completed_seq >= seq;
}

uint64_t completion_lower_bound_ns(const DeviceTimeline& tl, uint32_t slot, uint64_t seq) {
  if (slot >= kMaxContexts) return 0;
  const ContextSlot& c = tl.contexts[slot];
  if (c.completed_seq >= seq) return 0;
  // Peers' arrivals are seen only when this device is evaluated, and a part
  // released in the past completes at that look: look every poll interval,
  // however much work is queued, so peers' next parts are not held up.
  if (waits_for_peers(c, seq)) return kCollectivePollNs;
  const uint64_t own = queued_work_ns(c, seq, UINT64_MAX);
  uint64_t wait = 0;
  const int holder = tl.running;
  if (own > 0 && holder >= 0 && static_cast<uint32_t>(holder) != slot &&
      (tl.pending_mask & bit(static_cast<uint32_t>(holder))) != 0) {
    const uint64_t slice_left =
        tl.slice_used_ns < tl.timeslice_ns ? tl.timeslice_ns - tl.slice_used_ns : 0;
    wait = std::min(slice_left, queued_work_ns(tl.contexts[holder], UINT64_MAX, slice_left));
  }
  return own + wait;
}

void repair_timeline(DeviceTimeline& tl) {
  tl.pending_mask = 0;
  for (uint32_t s = 0; s < kMaxContexts; ++s) {
    ContextSlot& c = tl.contexts[s];
    if (c.state > static_cast<uint32_t>(ContextState::kRetired)) {
      c.state = static_cast<uint32_t>(ContextState::kRetired);
    }
    if (c.tail < c.head || c.tail - c.head > kQueueDepth ||
        c.state != static_cast<uint32_t>(ContextState::kActive)) {
      c.head = c.tail;
    }
    if (c.next_seq < c.completed_seq + 1) c.next_seq = c.completed_seq + 1;
    if (c.head != c.tail) tl.pending_mask |= bit(s);
  }
  if (tl.running >= static_cast<int32_t>(kMaxContexts) || tl.running < -1) tl.running = -1;
  if (tl.timeslice_ns == 0) tl.timeslice_ns = 1;
  if (tl.slice_used_ns > tl.timeslice_ns) tl.slice_used_ns = tl.timeslice_ns;
}

}  // namespace egpu::simgpu
