// One reading of a GPU's ground truth: device clock and cumulative busy time per
// context. Independent of where it came from (the simulated driver today).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace egpu::harness {

struct ContextUsage {
  pid_t pid = 0;
  int device = 0;
  std::string label;
  std::uint64_t busy_ns = 0;  // cumulative device time of this context
  bool alive = true;          // false once destroyed or its process died
};

struct UsageSample {
  std::chrono::steady_clock::time_point taken_at;  // host time of the reading
  std::uint64_t clock_ns = 0;                      // device clock
  std::vector<ContextUsage> contexts;
};

}  // namespace egpu::harness
