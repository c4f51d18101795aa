// The monotonic clock every component agrees on (the GPU page's heartbeat and
// FAA's time are CLOCK_MONOTONIC nanoseconds), and the wall clock.
#pragma once

#include <time.h>

#include <cstdint>

namespace egpu {

inline int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Wall-clock time, for what is reported as dates (accounting records).
inline int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace egpu
