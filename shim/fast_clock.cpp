#include "shim/fast_clock.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "core/util/clock.h"

namespace egpu::shim::detail {

constinit std::atomic<const CounterScale*> g_counter_scale{nullptr};

namespace {

// The counter is usable when its rate is constant and it runs in every
// power state (x86: constant_tsc + nonstop_tsc); arm64's generic timer always is.
bool counter_is_invariant() {
#if defined(__x86_64__)
  FILE* f = std::fopen("/proc/cpuinfo", "re");
  if (f == nullptr) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    constant = std::strstr(line, " constant_tsc") != nullptr;
    nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
    break;
  }
  std::fclose(f);
  return constant && nonstop;
#elif defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

// Calibration: a first point at the first call, the rate from a second one
// at least kCalibrationNs later (clock_gettime until then).
constexpr int64_t kCalibrationNs = 50'000'000;
std::atomic<int> g_state{0};  // 0 first call pending, 1 measuring, 2 done or unusable
int64_t g_first_ns = 0;
uint64_t g_first_ticks = 0;

}  // namespace

int64_t launch_clock_slow() {
  const int64_t now = monotonic_ns();
  int state = g_state.load(std::memory_order_acquire);
  if (state == 0) {
    int expected = 0;
    if (g_state.compare_exchange_strong(expected, 3, std::memory_order_acq_rel)) {
      if (!counter_is_invariant()) {
        g_state.store(2, std::memory_order_release);
        return now;
      }
      g_first_ticks = read_counter();
      g_first_ns = monotonic_ns();
      g_state.store(1, std::memory_order_release);
    }
    return now;
  }
  if (state != 1 || now - g_first_ns < kCalibrationNs) return now;
  int expected = 1;
  if (!g_state.compare_exchange_strong(expected, 3, std::memory_order_acq_rel)) return now;
  const uint64_t ticks = read_counter();
  const int64_t at = monotonic_ns();
  if (ticks > g_first_ticks && at > g_first_ns) {
    // Never freed: readers may hold it at any time.
    auto* scale = new (std::nothrow) CounterScale{
        at, ticks,
        static_cast<double>(at - g_first_ns) / static_cast<double>(ticks - g_first_ticks)};
    if (scale != nullptr) g_counter_scale.store(scale, std::memory_order_release);
  }
  g_state.store(2, std::memory_order_release);
  return at;
}

}  // namespace egpu::shim::detail
