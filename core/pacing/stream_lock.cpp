#include "core/pacing/stream_lock.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

namespace egpu::pacing {
namespace {

constexpr int kSpins = 64;         // a launch's bookkeeping is well under this
constexpr int kYields = 64;        // then let another thread (the holder) run
constexpr long kSleepNs = 20'000;  // then the holder is in the driver: sleep

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void StreamLock::lock_contended() noexcept {
  // The sleep is a cancellation point: a pthread_cancel acted on here would
  // unwind through this noexcept function and the shim's catch-alls
  // (std::terminate). The request stays pending for the program's next
  // cancellation point. Only the contended path pays for this.
  int cancel_state = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  for (int round = 0;; ++round) {
    if (try_lock()) {
      pthread_setcancelstate(cancel_state, nullptr);
      return;
    }
    if (round < kSpins) {
      cpu_relax();
    } else if (round < kSpins + kYields) {
      sched_yield();
    } else {
      const timespec pause{0, kSleepNs};
      clock_nanosleep(CLOCK_MONOTONIC, 0, &pause, nullptr);
    }
  }
}

}  // namespace egpu::pacing
