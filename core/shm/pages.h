// Shared-memory page layouts between the node agent and the shims.
//
// Pages are split by writer (DESIGN.md "Shared memory and the control socket"):
// - GpuPage, one per physical GPU, is written only by the agent (root, 0600;
//   attached shims get a read-only descriptor): who holds the slice, the
//   heartbeat, and per instance only what its shims enforce (SlotGrant).
// - GpuRecordPage, beside it, is root's alone (0600, never passed to a job):
//   each instance's full record (job, uid, creator, objective) that a
//   restarted agent takes over. Kept apart so that a job that maps its GPU's
//   page cannot read who else shares the GPU.
// - InstancePage, one per instance, is owned by the job's uid (0600) and written
//   by that instance's processes: their activity, device time, memory. The agent
//   reads it, and writes only a process slot's pid (attach, reclaim).
// Fields are fixed-size atomics: no pointers, and readers validate what they read.
// Pages go through small APIs in core: the GPU page through gpu_page_io.h
// and slot_control_io.h (which also writes the record page); the instance page through
// proc_slot_io.h, latency_counts.h, quota/memory_quota.h and grant_futex.h (grant_word), except the
// header fields, which the agent writes once when it creates the page. Each field below says its
// writer, its unit and the bound the agent reads it with.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "core/slo/latency_histogram.h"

namespace egpu::shm {

inline constexpr uint32_t kGpuPageMagic = 0x47504745;        // "EGPG"
inline constexpr uint32_t kInstancePageMagic = 0x49504745;   // "EGPI"
inline constexpr uint32_t kGpuRecordPageMagic = 0x52504745;  // "EGPR"
// 2: InstancePage::grant_word; 3: SlotControl::mem_limit (128 bytes);
// 4: SlotControl's latency objective, InstancePage's latency counts;
// 5: SlotControl::granted_units; 6: SlotControl split into the GPU page's
// SlotGrant and the record page's SlotRecord
inline constexpr uint32_t kLayoutVersion = 6;
inline constexpr uint32_t kMaxSlotsPerGpu = 256;
inline constexpr uint32_t kMaxProcsPerInstance = 64;
inline constexpr uint32_t kNoHolder = 0xffffffff;

// SlotRecord.flags bit beyond the protocol's create flags.
inline constexpr uint32_t kSlotQuotaExplicit = 1u << 16;
// SlotGrant.mem_limit when the agent knows no memory size for the GPU:
// allocations are accounted, never refused.
inline constexpr uint64_t kNoMemLimit = UINT64_MAX;

// Bounds the agent applies to what it reads from an instance page (the
// job's to write): proc_slot_io.h and latency_counts.h read through them.
inline constexpr uint32_t kMaxBusyThreads = 1024;  // threads of one process waiting
// Queued device time: the in-flight limit the agent publishes is far below.
inline constexpr uint64_t kMaxInflightNs = 1'000'000'000;
// Cumulative times and counts: 2^56 ns is over two years, and fewer than
// 256 of them summed (64 slots, 240 latency buckets) cannot wrap.
inline constexpr uint64_t kMaxCumulative = uint64_t{1} << 56;

enum class SlotState : uint32_t { kFree = 0, kActive = 1 };

// Per instance, in the GPU page (agent-written): what the instance's shims
// enforce, and nothing about who runs it.
struct alignas(64) SlotGrant {
  std::atomic<uint64_t> instance_id;  // 0 while free
  std::atomic<uint32_t> units;        // the step's units (1..100)
  // What the shims enforce (bytes, or kNoMemLimit): the own quota, less what
  // the job's steps hold for an umbrella (steps and the batch script share one
  // job quota). Reservations add, then read this: the agent lowers it, then
  // reads the use, so one of the two always sees the other.
  std::atomic<uint64_t> mem_limit;
};
static_assert(sizeof(SlotGrant) == 64);

// Per instance, in the record page (root's alone): what a restarted agent
// needs to take the instance over.
struct alignas(64) SlotRecord {
  std::atomic<uint64_t> instance_id;  // 0 while free
  std::atomic<uint64_t> mem_quota;    // bytes: the instance's own quota (0: none)
  std::atomic<uint64_t> job_id;
  std::atomic<uint32_t> step_id;
  std::atomic<uint32_t> state;      // SlotState
  std::atomic<uint32_t> units;      // the step's units (1..100)
  std::atomic<uint32_t> job_units;  // the job's allocation on this GPU
  std::atomic<uint32_t> mode;       // mode_value(Mode), core/util/mode.h
  std::atomic<uint32_t> uid;
  std::atomic<uint32_t> gid;
  std::atomic<uint32_t>
      flags;  // protocol::kCreateUmbrella | kCreateSpansNodes | kSlotQuotaExplicit
  // The process whose end ends the instance (0: none), and its start time in
  // clock ticks (low 32 bits): a restarted agent tells it from a reused pid.
  std::atomic<int32_t> creator_pid;
  std::atomic<uint32_t> creator_start;
  // The instance's latency objective (core/slo/latency_objective.h), kept
  // here so it outlives an agent restart; 0 and 0: none.
  std::atomic<uint32_t> slo_percentile_milli;
  std::atomic<int64_t> slo_target_ns;
  // What Slurm granted the job on this GPU (Instance::granted_units).
  std::atomic<uint32_t> granted_units;
};
static_assert(sizeof(SlotRecord) == 128);

struct GpuPage {
  uint32_t magic;
  uint32_t version;
  uint32_t gpu_index;
  uint32_t max_slots;
  uint64_t gpu_memory_bytes;
  std::atomic<uint64_t> agent_epoch;  // new value on every agent start

  alignas(64) std::atomic<int64_t> heartbeat_ns;  // agent's CLOCK_MONOTONIC at its last beat
  std::atomic<int64_t> heartbeat_timeout_ns;
  std::atomic<int64_t> inflight_limit_ns;  // device time a process may have queued
  std::atomic<uint32_t> fail_mode;         // fail_mode_value(FailMode), core/util/fail_mode.h
  // While the GPU drains an old holder's tail (holder == kNoHolder), the
  // draining process kicks the agent when its queue falls to this, so the
  // agent need not poll for it. 0 (a page from an older agent): no kick.
  std::atomic<int64_t> handover_tail_ns;

  // The hot line: shims read `holder` on every launch. `grant_seq` counts
  // holder changes (waiters sleep on their instance page's grant_word).
  alignas(64) std::atomic<uint32_t> holder;  // slot index, or kNoHolder
  std::atomic<uint32_t> grant_seq;
  std::atomic<int64_t> slice_end_ns;
  // Instances asking for the slice besides the holder: a holder that goes
  // idle tells the agent at once (wake channel) only when someone waits.
  std::atomic<uint32_t> waiters;

  alignas(64) SlotGrant slots[kMaxSlotsPerGpu];
};

struct GpuRecordPage {
  uint32_t magic;
  uint32_t version;
  uint32_t gpu_index;
  alignas(64) SlotRecord records[kMaxSlotsPerGpu];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex word must be 32 bits");

// Per process, in the instance page. Written by that process's shim
// (ProcSlotWriter) except `pid`; read by the agent through read_proc_slot,
// with the bound after each field.
struct alignas(64) ProcSlot {
  std::atomic<int32_t> pid;    // agent-written: attached process, 0 = free (< 0 reads 0)
  std::atomic<uint32_t> busy;  // threads blocked at the gate, in the in-flight bound or a
                               // sync (<= kMaxBusyThreads)
  // Moves at every launch: activity the agent can see (it asks only whether
  // it moved). Not an exact count: the shim's threads step it with a plain
  // load and store, no locked add on the launch path, so two may write the
  // same value.
  std::atomic<uint64_t> launches;
  // Device time measured so far (ns, cumulative; the agent takes forward
  // progress only, at most an hour per look).
  std::atomic<uint64_t> device_ns;
  // Device memory accounted to this process (bytes; core/quota/memory_quota,
  // whose sum saturates).
  std::atomic<uint64_t> mem_bytes;
  std::atomic<uint64_t> throttled_ns;  // ns waiting at the gate (<= kMaxCumulative)
  std::atomic<uint64_t> inflight_ns;   // device time estimated queued now (<= kMaxInflightNs)
  std::atomic<uint64_t> mem_denied;    // allocations refused for the quota (<= kMaxCumulative)
  // CLOCK_MONOTONIC when a synchronising call returned with nothing left
  // queued: the agent lets a holder go that many ns + its grace later
  // (< 0 reads 0; a time after the agent's now is ignored).
  std::atomic<int64_t> idle_since_ns;
};
static_assert(sizeof(ProcSlot) == 64);

struct InstancePage {
  uint32_t magic;
  uint32_t version;
  uint64_t instance_id;
  uint32_t gpu_index;
  uint32_t gpu_slot;
  // The agent bumps it when it grants this instance the slice (and when
  // every waiter must look: agent stop, restart); its waiting processes
  // sleep on it (core/shm/grant_futex.h). Only the owner can map this page.
  std::atomic<uint32_t> grant_word;
  // Serialises quota checks across the instance's processes (robust: a process
  // killed while holding it does not block the others).
  alignas(64) pthread_mutex_t alloc_lock;
  alignas(64) ProcSlot procs[kMaxProcsPerInstance];

  // Latency samples of the instance's work, written by its processes: each
  // adds 1 to the bucket (core/slo/latency_histogram.h) of a burst of GPU
  // work it saw end (first launch after idle to the synchronise that found
  // it done), or of a request its program reported (egpu_report_latency;
  // a process that reports stops adding bursts). Cumulative: the agent reads
  // differences, and treats a count that went down as reset (each count
  // <= kMaxCumulative; burst_gate_ns <= burst_ns).
  alignas(64) std::atomic<uint64_t> latency_counts[slo::kLatencyBuckets];
  std::atomic<uint64_t> burst_ns;       // the bursts' spans, summed
  std::atomic<uint64_t> burst_gate_ns;  // ...of which waiting at the gate
};

}  // namespace egpu::shm
