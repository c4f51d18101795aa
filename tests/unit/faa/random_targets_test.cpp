// Property tests: random target sets (seeded), every instance asking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

constexpr int kCases = 200;
constexpr Nanos kRun = 2 * kSecond;
constexpr Nanos kWindow = 500 * kMillisecond;
constexpr Nanos kTick = 100 * kMicrosecond;
// A cap instance's bucket holds one slice: refill that arrives while it waits
// with a full bucket is lost, so under full contention it may end a little
// below its target (worst seen: 1.9 pp). It is never above.
constexpr double kCapShortfall = 0.025;
// Pinned so a failure names a reproducible case.
constexpr std::uint32_t kSeed = 20261129;

struct TargetSet {
  std::vector<int> units;
  std::vector<Mode> modes;
};

// 2-16 instances splitting `total` units (each >= 1), a quarter of them cap.
TargetSet random_set(std::mt19937& rng, int total) {
  const int count = std::uniform_int_distribution<int>(2, std::min(16, total))(rng);
  std::vector<int> points(static_cast<std::size_t>(total - 1));
  std::iota(points.begin(), points.end(), 1);
  std::shuffle(points.begin(), points.end(), rng);
  points.resize(static_cast<std::size_t>(count - 1));
  std::sort(points.begin(), points.end());
  TargetSet set;
  int previous = 0;
  for (int point : points) {
    set.units.push_back(point - previous);
    previous = point;
  }
  set.units.push_back(total - previous);
  for (std::size_t i = 0; i < set.units.size(); ++i) {
    const bool cap = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
    set.modes.push_back(cap ? Mode::kCap : Mode::kBurst);
  }
  return set;
}

std::string describe(const TargetSet& set) {
  std::string text;
  for (std::size_t i = 0; i < set.units.size(); ++i) {
    text += std::to_string(set.units[i]) + (set.modes[i] == Mode::kCap ? "c " : " ");
  }
  return text;
}

struct Outcome {
  sim::FaaSim sim{sim::SimOptions{}};
  std::vector<std::size_t> ids;
};

void run(const TargetSet& set, Outcome& out) {
  for (std::size_t i = 0; i < set.units.size(); ++i) {
    out.ids.push_back(
        out.sim.add(set.units[i] / 100.0, set.modes[i], sim::Workload::greedy(kSimKernel)));
  }
  out.sim.run_until(kRun);
}

// Sum of targets = 1: every instance gets its share, caps never exceed theirs.
TEST(RandomTargets, FullyAllocatedSharesWaitsAndCaps) {
  std::mt19937 rng(kSeed);
  int strict_misses = 0;
  Nanos worst_excess = 0;
  for (int c = 0; c < kCases; ++c) {
    const TargetSet set = random_set(rng, 100);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(set));
    Outcome out;
    run(set, out);
    double total = 0.0;
    bool strict_ok = true;
    for (std::size_t i = 0; i < set.units.size(); ++i) {
      const double target = set.units[i] / 100.0;
      const double share = out.sim.share(out.ids[i], 0, kRun);
      total += share;
      if (set.modes[i] == Mode::kBurst) {
        EXPECT_GE(share, target - 0.006) << "burst " << set.units[i] << "%";
        EXPECT_LE(share, target + 0.015) << "burst " << set.units[i] << "%";
      } else {
        EXPECT_GE(share, target - kCapShortfall) << "cap " << set.units[i] << "%";
        EXPECT_LE(out.sim.max_window_use(out.ids[i], kWindow, 0, kRun),
                  static_cast<Nanos>(target * kWindow) + kSlice + kTick)
            << "cap " << set.units[i] << "%";
      }
      const Nanos wait = out.sim.longest_wait(out.ids[i]);
      const Nanos bound = wait_bound(target);
      if (wait > bound + kTick) strict_ok = false;
      worst_excess = std::max(worst_excess, wait - bound);
      // The anti-starvation guard keeps waits within ceil(1/s) + 1 slices in
      // most sets (not all: see slice_scheduler_decide.cpp) and within two
      // more slices in every set seen.
      EXPECT_LE(wait, bound + 2 * kSlice + kTick) << "wait of " << set.units[i] << "%";
    }
    EXPECT_GE(total, 0.999);
    if (!strict_ok) ++strict_misses;
  }
  std::printf("strict wait bound missed in %d of %d sets, worst by %.1f slices\n", strict_misses,
              kCases, static_cast<double>(worst_excess) / kSlice);
  EXPECT_LE(strict_misses, kCases / 4);
}

// Sum of targets below 1: burst instances share the rest, caps never take it.
TEST(RandomTargets, UnallocatedCapacityGoesToBurstOnly) {
  std::mt19937 rng(kSeed + 1);
  for (int c = 0; c < kCases; ++c) {
    const int total = std::uniform_int_distribution<int>(20, 95)(rng);
    const TargetSet set = random_set(rng, total);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(set));
    Outcome out;
    run(set, out);
    const bool any_burst = std::count(set.modes.begin(), set.modes.end(), Mode::kBurst) > 0;
    double total_share = 0.0;
    for (std::size_t i = 0; i < set.units.size(); ++i) {
      const double target = set.units[i] / 100.0;
      const double share = out.sim.share(out.ids[i], 0, kRun);
      total_share += share;
      if (set.modes[i] == Mode::kBurst) {
        EXPECT_GE(share, target - 0.006) << "burst " << set.units[i] << "%";
      } else {
        EXPECT_GE(share, target - kCapShortfall) << "cap " << set.units[i] << "%";
        EXPECT_LE(out.sim.max_window_use(out.ids[i], kWindow, 0, kRun),
                  static_cast<Nanos>(target * kWindow) + kSlice + kTick)
            << "cap " << set.units[i] << "%";
      }
    }
    if (any_burst) {
      EXPECT_GE(total_share, 0.999);
    }
  }
}

}  // namespace
}  // namespace egpu::faa::test
