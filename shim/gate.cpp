#include "shim/gate.h"

#include <algorithm>

#include "core/shm/gpu_page_io.h"
#include "core/shm/grant_futex.h"
#include "core/util/clock.h"
#include "shim/agent_clock.h"

namespace egpu::shim {

namespace {

// The GPU drains `queued` (this process's own tail, longer than the handover
// tail) for a waiting successor: no holder, someone waiting.
bool draining_own_tail(const shm::GpuPage& gpu, int64_t queued) {
  const int64_t tail = shm::handover_tail(gpu);
  return tail > 0 && queued > tail && shm::slice_holder(gpu) == shm::kNoHolder &&
         shm::someone_waits(gpu);
}

}  // namespace

SliceWait wait_for_slice(const Attachment& a, const std::function<int64_t()>& drain, bool kick) {
  const shm::GpuPage& gpu = *a.gpu;
  const int64_t start = monotonic_ns();
  a.me.begin_wait();
  bool asked = false;
  SliceWait outcome = SliceWait::kGranted;
  for (;;) {
    const uint32_t seq = a.instance->grant_word.load(std::memory_order_acquire);
    if (shm::slice_holder(gpu) == a.gpu_slot) break;
    if (shm::agent_epoch(gpu) != a.epoch) {
      outcome = SliceWait::kEpochChanged;
      break;
    }
    // Its slot may stay free for long: waiting for it to be granted would
    // hold a process that outlived its step here until the next tenant came.
    if (a.instance_gone()) {
      outcome = SliceWait::kInstanceGone;
      break;
    }
    const int64_t now = agent_clock_ns();  // the heartbeat is on it
    if (!shm::agent_alive(gpu, now)) {
      outcome = SliceWait::kAgentDead;
      break;
    }
    // One poll of this process's own queued work per round (it publishes it).
    const int64_t queued = drain ? drain() : 0;
    if (!asked) {
      // Once per wait: the agent re-decides now instead of at its next tick.
      // Not while this process's own tail is what the GPU drains for a
      // waiting successor: the agent already counts it as asking, and its
      // tail falling short kicks anyway (note_tail), one wake-up instead of two.
      // A process the slice was taken from asks too where nobody holds it:
      // the decision that took it may have found it idle (between two waits)
      // and planned no look at all; it waited at the gate for ever.
      const bool nobody_holds = shm::slice_holder(gpu) == shm::kNoHolder;
      if ((kick || nobody_holds) && !draining_own_tail(gpu, queued)) kick_agent(a);
      asked = true;
    }
    // Wake no later than the heartbeat could go stale.
    int64_t wait = kMaxFutexWaitNs;
    if (const auto stale_at = shm::heartbeat_stale_at(gpu)) {
      wait = std::clamp<int64_t>(*stale_at - now + 1'000'000, 1'000'000, kMaxFutexWaitNs);
    }
    if (queued > 0) wait = std::min(wait, kDrainPollNs);
    shm::sleep_until_granted(&a.instance->grant_word, seq, wait);
  }
  a.me.end_wait();
  a.me.add_throttled(monotonic_ns() - start);
  return outcome;
}

void note_idle(const Attachment& a) {
  a.me.mark_idle(agent_clock_ns());  // the agent compares it with its now
  // Someone waits, and this holder went idle or the tail the GPU drains
  // (no holder) is gone: the agent hands over now instead of at a poll.
  const uint32_t holder = shm::slice_holder(*a.gpu);
  if (shm::someone_waits(*a.gpu) && (holder == a.gpu_slot || holder == shm::kNoHolder)) {
    kick_agent(a);
  }
}

void note_tail(const Attachment& a, int64_t before, int64_t after) {
  const int64_t tail = shm::handover_tail(*a.gpu);
  if (tail > 0 && before > tail && after <= tail && shm::slice_holder(*a.gpu) == shm::kNoHolder) {
    kick_agent(a);
  }
}

void sleep_on_grant(const Attachment& a, int64_t ns) {
  const uint32_t seq = a.instance->grant_word.load(std::memory_order_acquire);
  shm::sleep_until_granted(&a.instance->grant_word, seq,
                           std::clamp<int64_t>(ns, 1'000, kMaxFutexWaitNs));
}

}  // namespace egpu::shim
