#include "core/shm/grant_futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace egpu::shm {
namespace {

// Not FUTEX_PRIVATE_FLAG: waker and waiters are different processes.
long futex(const std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout,
           uint32_t bitset) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, value, timeout, nullptr,
                   bitset);
}

}  // namespace

void sleep_until_granted(const std::atomic<uint32_t>* word, uint32_t expected, uint32_t slot,
                         int64_t timeout_ns) {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline.
  timespec deadline{};
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  const int64_t ns = deadline.tv_nsec + (timeout_ns > 0 ? timeout_ns : 0);
  deadline.tv_sec += static_cast<time_t>(ns / 1'000'000'000);
  deadline.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  futex(word, FUTEX_WAIT_BITSET, expected, &deadline, grant_bit(slot));
}

int wake_slot(std::atomic<uint32_t>* word, uint32_t slot) {
  return static_cast<int>(futex(word, FUTEX_WAKE_BITSET, INT_MAX, nullptr, grant_bit(slot)));
}

int wake_everyone(std::atomic<uint32_t>* word) {
  return static_cast<int>(futex(word, FUTEX_WAKE_BITSET, INT_MAX, nullptr, FUTEX_BITSET_MATCH_ANY));
}

}  // namespace egpu::shm
