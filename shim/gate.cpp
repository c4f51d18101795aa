#include "shim/gate.h"

#include <algorithm>

#include "core/shm/grant_futex.h"
#include "core/util/clock.h"

namespace egpu::shim {

bool agent_alive(const shm::GpuPage& gpu, int64_t now) {
  const int64_t timeout = gpu.heartbeat_timeout_ns.load(std::memory_order_relaxed);
  if (timeout <= 0) return true;
  return now - gpu.heartbeat_ns.load(std::memory_order_acquire) <= timeout;
}

namespace {

// The GPU drains `queued` (this process's own tail, longer than the handover
// tail) for a waiting successor: no holder, someone waiting.
bool draining_own_tail(const shm::GpuPage& gpu, int64_t queued) {
  const int64_t tail = gpu.handover_tail_ns.load(std::memory_order_relaxed);
  return tail > 0 && queued > tail &&
         gpu.holder.load(std::memory_order_acquire) == shm::kNoHolder &&
         gpu.waiters.load(std::memory_order_relaxed) != 0;
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
    if (gpu.holder.load(std::memory_order_acquire) == a.gpu_slot) break;
    if (gpu.agent_epoch.load(std::memory_order_acquire) != a.epoch) {
      outcome = SliceWait::kEpochChanged;
      break;
    }
    const int64_t now = monotonic_ns();
    if (!agent_alive(gpu, now)) {
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
      if (kick && !draining_own_tail(gpu, queued)) kick_agent(a);
      asked = true;
    }
    // Wake no later than the heartbeat could go stale.
    const int64_t timeout = gpu.heartbeat_timeout_ns.load(std::memory_order_relaxed);
    int64_t wait = kMaxFutexWaitNs;
    if (timeout > 0) {
      const int64_t stale_at = gpu.heartbeat_ns.load(std::memory_order_relaxed) + timeout;
      wait = std::clamp<int64_t>(stale_at - now + 1'000'000, 1'000'000, kMaxFutexWaitNs);
    }
    if (queued > 0) wait = std::min(wait, kDrainPollNs);
    shm::sleep_until_granted(&a.instance->grant_word, seq, wait);
  }
  a.me.end_wait();
  a.me.add_throttled(monotonic_ns() - start);
  return outcome;
}

void note_idle(const Attachment& a) {
  a.me.mark_idle(monotonic_ns());
  // Someone waits, and this holder went idle or the tail the GPU drains
  // (no holder) is gone: the agent hands over now instead of at a poll.
  const uint32_t holder = a.gpu->holder.load(std::memory_order_relaxed);
  if (a.gpu->waiters.load(std::memory_order_relaxed) != 0 &&
      (holder == a.gpu_slot || holder == shm::kNoHolder)) {
    kick_agent(a);
  }
}

void note_tail(const Attachment& a, int64_t before, int64_t after) {
  const int64_t tail = a.gpu->handover_tail_ns.load(std::memory_order_relaxed);
  if (tail > 0 && before > tail && after <= tail &&
      a.gpu->holder.load(std::memory_order_acquire) == shm::kNoHolder) {
    kick_agent(a);
  }
}

void sleep_on_grant(const Attachment& a, int64_t ns) {
  const uint32_t seq = a.instance->grant_word.load(std::memory_order_acquire);
  shm::sleep_until_granted(&a.instance->grant_word, seq,
                           std::clamp<int64_t>(ns, 1'000, kMaxFutexWaitNs));
}

}  // namespace egpu::shim
