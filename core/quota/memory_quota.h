// MemoryQuota: device-memory accounting of one instance across all its
// processes, on the instance page. A reservation checks and adds under one
// robust process-shared lock, so two processes allocating at once can never
// together pass the quota, and a process killed while holding the lock does not
// block the others. The total is the sum over attached processes, so reclaiming
// a dead process is a single store of its pid (by the agent).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/shm/pages.h"

namespace egpu::quota {

enum class Reservation {
  kGranted,
  kOverQuota,
  kLockUnavailable,  // lock held too long by a stopped process, or unrecoverable
};

// Initialises the lock of a new page (agent, at creation).
bool init_instance_lock(shm::InstancePage* page);

// Reserves `bytes` for process slot `proc` if the instance's total stays within
// `limit` (bytes, or shm::kNoMemLimit), read after the bytes were added: the
// agent lowers a limit and then reads the use (InstanceRegistry: an umbrella's
// limit shrinks when a step of its job starts), so either this sees the new
// limit or the agent sees these bytes. Never blocks longer than `lock_timeout_ns`.
Reservation reserve(shm::InstancePage* page, uint32_t proc, uint64_t bytes,
                    const std::atomic<uint64_t>& limit, int64_t lock_timeout_ns = 2'000'000'000);

// Returns `bytes` previously reserved by slot `proc` (saturating at zero).
void release(shm::InstancePage* page, uint32_t proc, uint64_t bytes);

// Sets what slot `proc` holds, outside any reservation: a process that
// (re)attaches states what it has live on the GPU.
void set_held(shm::InstancePage* page, uint32_t proc, uint64_t bytes);

// Adds to slot `proc` without the check: only when the lock is unavailable
// (a stopped process holds it), where accounting beats blocking.
void add_unchecked(shm::InstancePage* page, uint32_t proc, uint64_t bytes);

// What the shim does for every allocation and every growth of one: reserve(),
// and where the lock is unavailable, add_unchecked(). A stopped process of
// the job must not make its other processes' allocations fail: those the
// quota would allow would be refused. Returns what reserve() said; the bytes
// are accounted unless it said kOverQuota.
Reservation reserve_or_account(shm::InstancePage* page, uint32_t proc, uint64_t bytes,
                               const std::atomic<uint64_t>& limit,
                               int64_t lock_timeout_ns = 2'000'000'000);

// Bytes held by the instance's attached processes.
uint64_t used(const shm::InstancePage* page);

}  // namespace egpu::quota
