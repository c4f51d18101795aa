// The one way the GPU page (pages.h) is written and read. The agent, its
// only writer, publishes through GpuPageWriter, whose store order is what
// shims rely on: a new holder is visible before the grant count moves, and a
// stopping agent's zero heartbeat before it. Shims read it with the free
// functions below (attached shims hold a read-only mapping).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "core/shm/pages.h"
#include "core/util/fail_mode.h"

namespace egpu::shm {

class GpuPageWriter {
 public:
  explicit GpuPageWriter(GpuPage* page) : page_(page) {}

  uint32_t holder() const { return page_->holder.load(std::memory_order_relaxed); }
  // When the holder's slice ends (CLOCK_MONOTONIC ns; 0: open-ended).
  void set_slice_end(int64_t ns) const { page_->slice_end_ns.store(ns, std::memory_order_relaxed); }
  // Hands the slice to `slot`, or to nobody (kNoHolder) while a tail drains.
  // The caller wakes the new holder's waiters (grant_futex.h) after this.
  void grant(uint32_t slot) const {
    page_->holder.store(slot, std::memory_order_release);
    page_->grant_seq.fetch_add(1, std::memory_order_release);
  }
  // Instances asking besides the holder; true when the value changed.
  bool set_waiters(uint32_t n) const {
    if (page_->waiters.load(std::memory_order_relaxed) == n) return false;
    page_->waiters.store(n, std::memory_order_relaxed);
    return true;
  }
  // Device time a process may have queued (ns); true when it changed. Shims
  // read it on their next slow-path launch.
  bool set_inflight_bound(int64_t ns) const {
    if (page_->inflight_limit_ns.load(std::memory_order_relaxed) == ns) return false;
    page_->inflight_limit_ns.store(ns, std::memory_order_relaxed);
    return true;
  }
  void beat(int64_t now) const { page_->heartbeat_ns.store(now, std::memory_order_release); }
  // The agent stops: a zero heartbeat is stale at once, so shims apply their
  // fail mode without waiting for the timeout; the caller then wakes every
  // instance's waiters.
  void stop() const {
    page_->heartbeat_ns.store(0, std::memory_order_release);
    page_->grant_seq.fetch_add(1, std::memory_order_release);
  }

 private:
  GpuPage* page_;
};

// --- The shims' side ---

// The slot that holds the slice, or kNoHolder.
inline uint32_t slice_holder(const GpuPage& gpu) {
  return gpu.holder.load(std::memory_order_acquire);
}

// A new value on every agent start: a shim that sees another re-attaches.
inline uint64_t agent_epoch(const GpuPage& gpu) {
  return gpu.agent_epoch.load(std::memory_order_acquire);
}

// When the agent's last heartbeat goes stale (CLOCK_MONOTONIC ns); none when
// the agent set no timeout.
inline std::optional<int64_t> heartbeat_stale_at(const GpuPage& gpu) {
  const int64_t timeout = gpu.heartbeat_timeout_ns.load(std::memory_order_relaxed);
  if (timeout <= 0) return std::nullopt;
  return gpu.heartbeat_ns.load(std::memory_order_acquire) + timeout;
}

// Whether the agent beat within its timeout at `now`.
inline bool agent_alive(const GpuPage& gpu, int64_t now) {
  const std::optional<int64_t> stale_at = heartbeat_stale_at(gpu);
  return !stale_at || now <= *stale_at;
}

inline int64_t inflight_bound(const GpuPage& gpu) {
  return gpu.inflight_limit_ns.load(std::memory_order_relaxed);
}

// The queued time under which a draining process kicks the agent (0: no kick).
inline int64_t handover_tail(const GpuPage& gpu) {
  return gpu.handover_tail_ns.load(std::memory_order_relaxed);
}

// What shims do while the agent is gone (a value the agent wrote).
inline FailMode page_fail_mode(const GpuPage& gpu) {
  return fail_mode_from_value(gpu.fail_mode.load(std::memory_order_relaxed));
}

// What a slot grants its instance (SlotGrant, written by slot_control_io.h):
// its id (0: the slot is free), its units, the memory limit the shims enforce.
inline uint64_t slot_instance(const SlotGrant& c) {
  return c.instance_id.load(std::memory_order_acquire);
}
inline uint32_t slot_units(const SlotGrant& c) {
  return c.units.load(std::memory_order_relaxed);
}
inline uint64_t slot_mem_limit(const SlotGrant& c) {
  return c.mem_limit.load(std::memory_order_relaxed);
}

// Whether an instance besides the holder asks for the slice.
inline bool someone_waits(const GpuPage& gpu) {
  return gpu.waiters.load(std::memory_order_relaxed) != 0;
}

}  // namespace egpu::shm
