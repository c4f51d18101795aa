// The one way a ProcSlot (pages.h) is written and read. A process's shim
// writes its own slot through ProcSlotWriter; the agent hands slots out and
// takes them back with claim_proc_slot / release_proc_slot, and reads them
// only through read_proc_slot, which bounds every value: the page belongs to
// the job, so each field is whatever the job chose to write.
// (mem_bytes is written through core/quota/memory_quota, whose reservation
// protocol it is part of.)
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/shm/pages.h"

namespace egpu::shm {

// A handle on the calling process's own slot (the shim's side). Const
// methods: the handle does not change, the shared slot does.
class ProcSlotWriter {
 public:
  ProcSlotWriter() = default;
  explicit ProcSlotWriter(ProcSlot* slot) : slot_(slot) {}

  // A thread starts or stops waiting (at the gate, the in-flight bound, a
  // synchronise): the agent counts the process as asking meanwhile.
  void begin_wait() const { slot_->busy.fetch_add(1, std::memory_order_acq_rel); }
  void end_wait() const { slot_->busy.fetch_sub(1, std::memory_order_acq_rel); }
  // Time a thread spent waiting at the gate or the bound.
  void add_throttled(int64_t ns) const {
    if (ns > 0) slot_->throttled_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
  uint64_t throttled_ns() const { return slot_->throttled_ns.load(std::memory_order_relaxed); }
  // Moves the launch counter: the agent only asks whether it moved, so a
  // plain load and store (no locked add on the launch path; two threads may
  // write the same value).
  void note_launch() const {
    slot_->launches.store(slot_->launches.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
  }
  // Device time measured or estimated for this process's work.
  void add_device_ns(int64_t ns) const {
    if (ns > 0) slot_->device_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
  // Device time queued now (the agent drains it at a handover).
  void set_inflight(int64_t ns) const {
    slot_->inflight_ns.store(ns > 0 ? static_cast<uint64_t>(ns) : 0, std::memory_order_relaxed);
  }
  // A new process image's first attach: the slot may be its pid's from an
  // image that exec'd while threads waited, whose waits end with nothing to
  // count them off. Its queue went with that image too.
  void forget_waits() const {
    slot_->busy.store(0, std::memory_order_release);
    slot_->inflight_ns.store(0, std::memory_order_relaxed);
  }
  // A synchronising call returned with nothing left queued at `now`.
  void mark_idle(int64_t now) const { slot_->idle_since_ns.store(now, std::memory_order_relaxed); }
  // An allocation refused for the quota.
  void count_mem_denied() const { slot_->mem_denied.fetch_add(1, std::memory_order_relaxed); }

 private:
  ProcSlot* slot_ = nullptr;
};

// Device time measured by the instance's attached processes, as its own
// processes read it (the shim's closed-mode duty cycle): their page, no bound.
inline uint64_t attached_device_ns(const InstancePage& page) {
  uint64_t total = 0;
  for (const ProcSlot& p : page.procs) {
    if (p.pid.load(std::memory_order_relaxed) != 0) {
      total += p.device_ns.load(std::memory_order_relaxed);
    }
  }
  return total;
}

// One slot as the agent takes it: every value within its bound.
struct ProcReading {
  pid_t pid = 0;  // 0: free
  uint32_t busy = 0;
  uint64_t launches = 0;  // compared for change only
  uint64_t device_ns = 0;
  uint64_t throttled_ns = 0;
  uint64_t mem_denied = 0;
  int64_t inflight_ns = 0;
  int64_t idle_since_ns = 0;  // >= 0; the reader still compares it with now
};

inline ProcReading read_proc_slot(const ProcSlot& s) {
  ProcReading r;
  r.pid = std::max<pid_t>(s.pid.load(std::memory_order_acquire), 0);
  r.busy = std::min(s.busy.load(std::memory_order_acquire), kMaxBusyThreads);
  r.launches = s.launches.load(std::memory_order_acquire);
  r.device_ns = s.device_ns.load(std::memory_order_acquire);
  r.throttled_ns = std::min(s.throttled_ns.load(std::memory_order_relaxed), kMaxCumulative);
  r.mem_denied = std::min(s.mem_denied.load(std::memory_order_relaxed), kMaxCumulative);
  r.inflight_ns =
      static_cast<int64_t>(std::min(s.inflight_ns.load(std::memory_order_relaxed), kMaxInflightNs));
  r.idle_since_ns = std::max<int64_t>(s.idle_since_ns.load(std::memory_order_relaxed), 0);
  return r;
}

// The agent gives a free slot to `pid`: everything zero first, then the pid
// (release), so the process never sees its predecessor's values.
inline void claim_proc_slot(ProcSlot& s, pid_t pid) {
  s.busy.store(0, std::memory_order_relaxed);
  s.launches.store(0, std::memory_order_relaxed);
  s.device_ns.store(0, std::memory_order_relaxed);
  s.mem_bytes.store(0, std::memory_order_relaxed);
  s.throttled_ns.store(0, std::memory_order_relaxed);
  s.inflight_ns.store(0, std::memory_order_relaxed);
  s.mem_denied.store(0, std::memory_order_relaxed);
  s.idle_since_ns.store(0, std::memory_order_relaxed);
  s.pid.store(pid, std::memory_order_release);
}

// The agent takes back the slot of a process that ended. One store of the
// pid removes its memory from the instance's total (MemoryQuota sums
// attached processes only); its cumulative times stay in the instance's
// totals until the slot is claimed again.
inline void release_proc_slot(ProcSlot& s) {
  s.pid.store(0, std::memory_order_release);
  s.busy.store(0, std::memory_order_relaxed);
}

}  // namespace egpu::shm
