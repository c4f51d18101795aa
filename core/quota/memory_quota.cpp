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
  // Saturating: the page is the job's to write, and a wrapped sum would
  // read as little.
  uint64_t total = 0;
  for (const auto& p : page->procs) {
    if (p.pid.load(std::memory_order_seq_cst) != 0) {
      const uint64_t b = p.mem_bytes.load(std::memory_order_seq_cst);
      total = b > UINT64_MAX - total ? UINT64_MAX : total + b;
    }
  }
  return total;
}

Reservation reserve(shm::InstancePage* page, uint32_t proc, uint64_t bytes,
                    const std::atomic<uint64_t>& limit, int64_t lock_timeout_ns) {
  if (proc >= shm::kMaxProcsPerInstance) return Reservation::kLockUnavailable;
  if (bytes > limit.load(std::memory_order_seq_cst)) return Reservation::kOverQuota;
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
  const auto fits = [&] {
    const uint64_t l = limit.load(std::memory_order_seq_cst);
    return bytes <= l && now_used <= l - bytes;
  };
  Reservation result = Reservation::kOverQuota;
  if (fits()) {
    // Add, then read the limit again (see the header): the agent stores a
    // lower limit and then reads the use, so one of the two sees the other.
    auto& held = page->procs[proc].mem_bytes;
    held.fetch_add(bytes, std::memory_order_seq_cst);
    result = Reservation::kGranted;
    if (!fits()) {
      held.fetch_sub(bytes, std::memory_order_seq_cst);
      result = Reservation::kOverQuota;
    }
  }
  pthread_mutex_unlock(&page->alloc_lock);
  return result;
}

void set_held(shm::InstancePage* page, uint32_t proc, uint64_t bytes) {
  if (proc >= shm::kMaxProcsPerInstance) return;
  page->procs[proc].mem_bytes.store(bytes, std::memory_order_release);
}

void add_unchecked(shm::InstancePage* page, uint32_t proc, uint64_t bytes) {
  if (proc >= shm::kMaxProcsPerInstance) return;
  page->procs[proc].mem_bytes.fetch_add(bytes, std::memory_order_acq_rel);
}

Reservation reserve_or_account(shm::InstancePage* page, uint32_t proc, uint64_t bytes,
                               const std::atomic<uint64_t>& limit, int64_t lock_timeout_ns) {
  const Reservation r = reserve(page, proc, bytes, limit, lock_timeout_ns);
  if (r == Reservation::kLockUnavailable) add_unchecked(page, proc, bytes);
  return r;
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
