// Shared helpers for the FAA tests: scheduler creation and simulated runs of
// greedy instances, with the bound FAA promises on waits.
#ifndef EGPU_TESTS_UNIT_FAA_TEST_SUPPORT_H
#define EGPU_TESTS_UNIT_FAA_TEST_SUPPORT_H

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/faa/slice_scheduler.h"
#include "sim/faa_sim.h"

namespace egpu::faa::test {

inline constexpr Nanos kSlice = 10 * kMillisecond;
inline constexpr Nanos kSimKernel = 100 * kMicrosecond;

inline SliceScheduler make_scheduler(const Config& config = Config{}, Nanos now = 0) {
  Result<SliceScheduler> created = SliceScheduler::create(config, now);
  EXPECT_TRUE(created.ok()) << created.error();
  return std::move(created.value());
}

// ceil(1/share) + 1 slices: the longest wait FAA aims at between grants.
inline Nanos wait_bound(double share, Nanos slice = kSlice) {
  return (static_cast<Nanos>(std::ceil(1.0 / share - 1e-9)) + 1) * slice;
}

// Adds one greedy instance per target (units of 1%) and returns their indices.
inline std::vector<std::size_t> add_greedy(sim::FaaSim& sim, const std::vector<int>& units,
                                           Mode mode = Mode::kBurst) {
  std::vector<std::size_t> added;
  for (int unit : units) {
    added.push_back(sim.add(unit / 100.0, mode, sim::Workload::greedy(kSimKernel)));
  }
  return added;
}

}  // namespace egpu::faa::test

#endif  // EGPU_TESTS_UNIT_FAA_TEST_SUPPORT_H
