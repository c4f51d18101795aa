// The monotonic clock every component agrees on (the GPU page's heartbeat and
// FAA's time are CLOCK_MONOTONIC nanoseconds).
#pragma once

#include <time.h>

#include <cstdint>

namespace egpu {

inline int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace egpu
