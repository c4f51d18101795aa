#include "core/quota/memory_quota.h"

#include <time.h>

#include <cerrno>

namespace egpu::quota {

bool init_instance_lock(shm::InstancePage* page) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return false;
  bool ok = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
            pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
            pthread_mutex_init(&page->alloc_lock, &attr) == 0;
  pthread_mutexattr_destroy(&attr);
  return ok;
}

uint64_t used(const shm::InstancePage* page) {
  uint64_t total = 0;
  for (const auto& p : page->procs) {
    if (p.pid.load(std::memory_order_acquire) != 0) {
      total += p.mem_bytes.load(std::memory_order_acquire);
    }
  }
  return total;
}

Reservation reserve(shm::InstancePage* page, uint32_t proc, uint64_t bytes, uint64_t quota,
                    int64_t lock_timeout_ns) {
  if (proc >= shm::kMaxProcsPerInstance) return Reservation::kLockUnavailable;
  timespec deadline{};
  // CLOCK_MONOTONIC: a wall clock stepped back (NTP, an admin) would stretch
  // the wait of every allocation that finds the lock taken.
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += lock_timeout_ns / 1'000'000'000;
  deadline.tv_nsec += lock_timeout_ns % 1'000'000'000;
  if (deadline.tv_nsec >= 1'000'000'000) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1'000'000'000;
  }
  int rc = pthread_mutex_clocklock(&page->alloc_lock, CLOCK_MONOTONIC, &deadline);
  if (rc == EOWNERDEAD) {
    // The holder died between its check and its add, or after: every update
    // below is one store, so the state is consistent as it stands.
    pthread_mutex_consistent(&page->alloc_lock);
    rc = 0;
  }
  if (rc != 0) return Reservation::kLockUnavailable;
  const uint64_t now_used = used(page);
  Reservation result = Reservation::kOverQuota;
  if (bytes <= quota && now_used <= quota - bytes) {
    page->procs[proc].mem_bytes.fetch_add(bytes, std::memory_order_acq_rel);
    result = Reservation::kGranted;
  }
  pthread_mutex_unlock(&page->alloc_lock);
  return result;
}

void release(shm::InstancePage* page, uint32_t proc, uint64_t bytes) {
  if (proc >= shm::kMaxProcsPerInstance) return;
  auto& held = page->procs[proc].mem_bytes;
  uint64_t cur = held.load(std::memory_order_relaxed);
  while (
      !held.compare_exchange_weak(cur, cur >= bytes ? cur - bytes : 0, std::memory_order_acq_rel)) {
  }
}

}  // namespace egpu::quota
