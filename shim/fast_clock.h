// The launch path's clock: monotonic nanoseconds from the CPU's invariant
// counter (a few ns: rdtsc, or cntvct_el0 on arm64) instead of clock_gettime
// (15-40 ns, a third of the launch budget). Its values are compared only with
// each other (pacing, check deadlines), never with the agent's
// CLOCK_MONOTONIC heartbeat, which keeps using monotonic_ns().
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace egpu::shim {

namespace detail {
struct CounterScale {
  int64_t base_ns;
  uint64_t base_ticks;
  double ns_per_tick;
};
extern std::atomic<const CounterScale*> g_counter_scale;
int64_t launch_clock_slow();

inline uint64_t read_counter() {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t ticks;
  asm volatile("mrs %0, cntvct_el0" : "=r"(ticks));
  return ticks;
#else
  return 0;
#endif
}
}  // namespace detail

inline int64_t launch_clock_ns() {
  const detail::CounterScale* s = detail::g_counter_scale.load(std::memory_order_acquire);
  if (s == nullptr) return detail::launch_clock_slow();
  const uint64_t ticks = detail::read_counter() - s->base_ticks;
  return s->base_ns + static_cast<int64_t>(static_cast<double>(ticks) * s->ns_per_tick);
}

}  // namespace egpu::shim
