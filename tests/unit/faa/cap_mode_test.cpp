// Cap instances: never above target by more than one slice in any window.
#include <gtest/gtest.h>

#include <vector>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

constexpr Nanos kRun = 2 * kSecond;
constexpr Nanos kWindow = 500 * kMillisecond;

// Target * window + one slice: the most a cap instance may use in a window.
Nanos cap_limit(double target) {
  return static_cast<Nanos>(target * static_cast<double>(kWindow)) + kSlice;
}

TEST(CapMode, AloneUsesItsTargetNotMore) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t capped = sim.add(0.30, Mode::kCap, sim::Workload::greedy(kSimKernel));
  sim.run_until(kRun);
  EXPECT_NEAR(sim.share(capped, 0, kRun), 0.30, 0.005 + static_cast<double>(kSlice) / kRun);
  EXPECT_LE(sim.max_window_use(capped, kWindow, 0, kRun), cap_limit(0.30));
  // Steady state, after the bucket's initial slice: the target, give or take
  // the simulator's 0.1 ms tick per grant (repaid from the tokens later).
  EXPECT_NEAR(sim.share(capped, kSecond, kRun), 0.30, 0.001);
}

// Lending changes an instance's share (core/slo), not how its time is sliced:
// alone, a lend instance takes the whole GPU as a burst one does.
TEST(CapMode, ALendInstanceIsSlicedAsBurst) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t lend = sim.add(0.30, Mode::kLend, sim::Workload::greedy(kSimKernel));
  sim.run_until(kRun);
  EXPECT_GT(sim.share(lend, 0, kRun), 0.99);
  EXPECT_EQ(sim.scheduler().stats(sim.id(lend), kRun)->mode, Mode::kBurst);
  sim.resize(lend, 0.30, Mode::kCap);
  sim.run_until(2 * kRun);
  EXPECT_NEAR(sim.share(lend, kRun + kSecond, 2 * kRun), 0.30, 0.01);
}

TEST(CapMode, BesideBurstInstancesNeverAboveTargetPlusOneSlicePerWindow) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t capped = sim.add(0.30, Mode::kCap, sim::Workload::greedy(kSimKernel));
  const std::size_t burst = sim.add(0.70, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  sim.run_until(kRun);
  EXPECT_LE(sim.max_window_use(capped, kWindow, 0, kRun), cap_limit(0.30));
  EXPECT_NEAR(sim.share(capped, 0, kRun), 0.30, 0.01);
  EXPECT_NEAR(sim.share(burst, 0, kRun), 0.70, 0.01);
}

TEST(CapMode, NeverTakesUnallocatedCapacity) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t capped = sim.add(0.30, Mode::kCap, sim::Workload::greedy(kSimKernel));
  const std::size_t burst = sim.add(0.20, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  sim.run_until(kRun);
  EXPECT_LE(sim.max_window_use(capped, kWindow, 0, kRun), cap_limit(0.30));
  EXPECT_LE(sim.share(capped, 0, kRun), 0.30 + static_cast<double>(kSlice) / kRun);
  // The burst instance takes the other 70%.
  EXPECT_NEAR(sim.share(burst, 0, kRun), 0.70, 0.01);
}

TEST(CapMode, SeveralCapsBesideAnIdleOneStayCapped) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::vector<std::size_t> caps = add_greedy(sim, {10, 25, 15}, Mode::kCap);
  sim.add(0.50, Mode::kBurst, sim::Workload::idle());
  sim.run_until(kRun);
  const std::vector<double> targets = {0.10, 0.25, 0.15};
  for (std::size_t i = 0; i < caps.size(); ++i) {
    EXPECT_LE(sim.max_window_use(caps[i], kWindow, 0, kRun), cap_limit(targets[i]));
    EXPECT_NEAR(sim.share(caps[i], 0, kRun), targets[i], 0.01);
  }
}

TEST(CapMode, LongKernelsDriveTokensNegativeAndDelayTheNextGrant) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.10, Mode::kCap, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  const Grant first = scheduler.decide(0);
  ASSERT_EQ(first.holder, std::optional<InstanceId>(1));
  EXPECT_EQ(first.until, kSlice);  // a full bucket: one slice
  // A 50 ms kernel overran the slice: all of it is charged.
  ASSERT_TRUE(scheduler.charge(1, 50 * kMillisecond, 50 * kMillisecond).ok());
  const Grant after = scheduler.decide(50 * kMillisecond);
  EXPECT_FALSE(after.holder.has_value());
  // The full bucket (10 ms) less 50 ms leaves -40 ms; at 10% it takes 410 ms
  // to get back to min_cap_grant (1 ms).
  const Nanos ready = after.until;
  EXPECT_EQ(ready, 460 * kMillisecond);
  EXPECT_FALSE(scheduler.decide(ready - kMillisecond).holder.has_value());
  EXPECT_EQ(scheduler.decide(ready).holder, std::optional<InstanceId>(1));
  const Result<InstanceStats> stats = scheduler.stats(1, ready);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats.value().charged, 50 * kMillisecond);
}

}  // namespace
}  // namespace egpu::faa::test
