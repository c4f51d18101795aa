#include "core/shm/grant_futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace egpu::shm {
namespace {

// Not FUTEX_PRIVATE_FLAG: waker and waiters are different processes.
long futex(const std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, value, timeout, nullptr,
                   0);
}

}  // namespace

void sleep_until_granted(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  const int64_t ns = timeout_ns > 0 ? timeout_ns : 0;
  const timespec relative{static_cast<time_t>(ns / 1'000'000'000),
                          static_cast<long>(ns % 1'000'000'000)};
  futex(word, FUTEX_WAIT, expected, &relative);
}

int wake_granted(std::atomic<uint32_t>* word) {
  word->fetch_add(1, std::memory_order_release);
  return static_cast<int>(futex(word, FUTEX_WAKE, kMaxWokenPerGrant, nullptr));
}

}  // namespace egpu::shm
