// Early yield, latency preemption and its guards.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

constexpr Nanos kTick = 100 * kMicrosecond;

// Joins 1 and 2 at 50% each and lets 2 run alone for a second, so 1 is far
// below its target (about -43 pp) and 2 far above; both then ask.
SliceScheduler scheduler_with_1_far_below() {
  SliceScheduler scheduler = make_scheduler();
  EXPECT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.join(2, 0.5, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.set_asking(2, true, 0).ok());
  for (Nanos t = 0; t < kSecond; t += kMillisecond) {
    EXPECT_EQ(scheduler.decide(t).holder, std::optional<InstanceId>(2));
    EXPECT_TRUE(scheduler.charge(2, kMillisecond, t + kMillisecond).ok());
  }
  // Its grants started every 10 ms from 0: the one from 1000 ms is current.
  EXPECT_EQ(scheduler.decide(kSecond).holder, std::optional<InstanceId>(2));
  EXPECT_EQ(scheduler.gpu_stats(kSecond).holder_since, kSecond);
  return scheduler;
}

TEST(EarlyYield, NextInstanceGetsTheSliceAtOnceAndYielderPaysOnlyItsUse) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  ASSERT_EQ(scheduler.decide(0).holder, std::optional<InstanceId>(1));
  const Nanos yield_at = 3 * kMillisecond;
  ASSERT_TRUE(scheduler.charge(1, yield_at, yield_at).ok());
  ASSERT_TRUE(scheduler.set_asking(1, false, yield_at).ok());
  const Grant next = scheduler.decide(yield_at);
  EXPECT_EQ(next.holder, std::optional<InstanceId>(2));
  EXPECT_EQ(next.until, yield_at + kSlice);
  const Result<InstanceStats> yielder = scheduler.stats(1, yield_at);
  ASSERT_TRUE(yielder.ok());
  EXPECT_EQ(yielder.value().charged, yield_at);
  const double decay = std::exp(-static_cast<double>(yield_at) / (500.0 * kMillisecond));
  EXPECT_NEAR(yielder.value().achieved, 3.0 / 500.0, 1e-9);
  EXPECT_NEAR(yielder.value().deviation, 0.5 * decay + 3.0 / 500.0 - 0.5, 1e-9);
}

TEST(EarlyYield, NoDeviceTimeIsLostWaitingForSliceEnds) {
  sim::FaaSim sim(sim::SimOptions{});
  // 3 ms of work every 20 ms: it yields after 3 ms of each burst.
  const std::size_t bursty = sim.add(
      0.5, Mode::kBurst, sim::Workload::bursts(3 * kMillisecond, 20 * kMillisecond, 0, kTick));
  const std::size_t greedy = sim.add(0.5, Mode::kBurst, sim::Workload::greedy(kTick));
  const Nanos run = 2 * kSecond;
  sim.run_until(run);
  // The bursty one got exactly its work (100 bursts of 3 ms), the greedy one
  // everything else: the device never idled while someone asked.
  EXPECT_EQ(sim.used(bursty, 0, run), 100 * 3 * kMillisecond);
  EXPECT_EQ(sim.used(bursty, 0, run) + sim.used(greedy, 0, run), run);
}

TEST(Preemption, FarBelowTargetTakesTheSliceAfterMinHold) {
  SliceScheduler scheduler = scheduler_with_1_far_below();
  const Nanos grant_start = kSecond;
  const Nanos asks_at = grant_start + 200 * kMicrosecond;
  ASSERT_TRUE(scheduler.set_asking(1, true, asks_at).ok());
  const Grant pending = scheduler.decide(asks_at);
  EXPECT_EQ(pending.holder, std::optional<InstanceId>(2));
  EXPECT_EQ(pending.until, grant_start + kMillisecond);  // decide again at min_hold
  const Grant taken = scheduler.decide(grant_start + kMillisecond);
  EXPECT_EQ(taken.holder, std::optional<InstanceId>(1));
  EXPECT_EQ(scheduler.gpu_stats(grant_start + kMillisecond).preemptions, 1U);
}

// Steps that come and go must not leave the history join() credited them:
// it counted as GPU time for relative deviations until it decayed, so that
// every deviation read about -target and an instance far below its target
// could no longer preempt one far above. Here 2 runs alone for a second,
// and 100 short steps of 40% come and go 100 ms before 1 asks.
TEST(Preemption, StepsThatCameAndWentDoNotBlockIt) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.3, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.3, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  for (Nanos t = 0; t < kSecond; t += kMillisecond) {
    if (t == 900 * kMillisecond) {
      for (InstanceId gone = 100; gone < 200; ++gone) {
        ASSERT_TRUE(scheduler.join(gone, 0.4, Mode::kBurst, t).ok());
        ASSERT_TRUE(scheduler.leave(gone, t).ok());
      }
    }
    ASSERT_EQ(scheduler.decide(t).holder, std::optional<InstanceId>(2));
    ASSERT_TRUE(scheduler.charge(2, kMillisecond, t + kMillisecond).ok());
  }
  ASSERT_EQ(scheduler.decide(kSecond).holder, std::optional<InstanceId>(2));
  ASSERT_TRUE(scheduler.set_asking(1, true, kSecond + 200 * kMicrosecond).ok());
  EXPECT_EQ(scheduler.decide(kSecond + kMillisecond).holder, std::optional<InstanceId>(1));
}

TEST(Preemption, BurstsOfAnInstanceBelowTargetStartWithinMinHold) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t greedy = sim.add(0.5, Mode::kBurst, sim::Workload::greedy(kTick));
  // 1 ms requests every 37 ms (never aligned with the 10 ms slices): it uses
  // ~3% against a 50% target, so it stays far below.
  const Nanos period = 37 * kMillisecond;
  const std::size_t latency = sim.add(
      0.5, Mode::kBurst, sim::Workload::bursts(kMillisecond, period, 3 * kMillisecond, kTick));
  const Nanos run = 2 * kSecond;
  sim.run_until(run);
  const std::vector<Nanos>& grants = sim.grant_times(latency);
  ASSERT_GE(grants.size(), 50U);
  std::size_t checked = 0;
  for (const Nanos granted : grants) {
    const Nanos arrival = 3 * kMillisecond + ((granted - 3 * kMillisecond) / period) * period;
    // At first both are at deviation 0 and it waits for the slice end like
    // anyone; a few requests later it is more than 5 pp below the greedy one.
    if (arrival < 100 * kMillisecond) continue;
    EXPECT_LE(granted - arrival, kMillisecond + kTick) << "request at " << arrival;
    ++checked;
  }
  EXPECT_GE(checked, 45U);
  EXPECT_GT(sim.used(greedy, 0, run), run * 9 / 10);
}

TEST(Preemption, NoneBetweenTwoInstancesNearTheirTargets) {
  sim::FaaSim sim(sim::SimOptions{});
  // Both use about their 50%: 4 ms of work every 8 ms, half a period apart.
  sim.add(0.5, Mode::kBurst, sim::Workload::bursts(4 * kMillisecond, 8 * kMillisecond, 0, kTick));
  sim.add(0.5, Mode::kBurst,
          sim::Workload::bursts(4 * kMillisecond, 8 * kMillisecond, 4 * kMillisecond, kTick));
  sim.run_until(2 * kSecond);
  EXPECT_EQ(sim.scheduler().gpu_stats(sim.now()).preemptions, 0U);
}

TEST(Preemption, NoPingPongBack) {
  SliceScheduler scheduler = scheduler_with_1_far_below();
  const Nanos grant_start = kSecond;
  const Nanos asks_at = grant_start + 2 * kMillisecond;
  ASSERT_TRUE(scheduler.set_asking(1, true, asks_at).ok());
  ASSERT_EQ(scheduler.decide(asks_at).holder, std::optional<InstanceId>(1));
  // 2 stops and asks again during 1's grant: newly asking, but far above 1.
  ASSERT_TRUE(scheduler.set_asking(2, false, asks_at + kMillisecond).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, asks_at + 2 * kMillisecond).ok());
  for (Nanos t = asks_at + 2 * kMillisecond; t < asks_at + kSlice; t += kMillisecond) {
    ASSERT_TRUE(scheduler.charge(1, kMillisecond, t).ok());
    EXPECT_EQ(scheduler.decide(t).holder, std::optional<InstanceId>(1)) << "at " << t;
  }
  EXPECT_EQ(scheduler.gpu_stats(asks_at + kSlice).preemptions, 1U);
}

TEST(Preemption, ThresholdIsConfigurable) {
  Config config;
  // Relative to what is used, 2 (target 70%) holds all of it and 1 (30%)
  // none: 1 is 60 pp below 2, short of the 90 pp threshold.
  config.preempt_threshold = 0.9;
  SliceScheduler scheduler = make_scheduler(config);
  ASSERT_TRUE(scheduler.join(1, 0.3, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.7, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  for (Nanos t = 0; t < kSecond; t += kMillisecond) {
    ASSERT_EQ(scheduler.decide(t).holder, std::optional<InstanceId>(2));
    ASSERT_TRUE(scheduler.charge(2, kMillisecond, t + kMillisecond).ok());
  }
  ASSERT_EQ(scheduler.decide(kSecond).holder, std::optional<InstanceId>(2));
  const Nanos grant_start = kSecond;
  ASSERT_TRUE(scheduler.set_asking(1, true, grant_start + 2 * kMillisecond).ok());
  const Grant grant = scheduler.decide(grant_start + 5 * kMillisecond);
  EXPECT_EQ(grant.holder, std::optional<InstanceId>(2));
  EXPECT_EQ(grant.until, grant_start + kSlice);
}

TEST(Preemption, IdleTimeDoesNotHideHowFarBelowItsShareAnInstanceIs) {
  // The GPU is used only half the time, by 2 (target 70%); 1 (30%) used
  // nothing. Measured against wall time 2 is below its target too (35 vs 70),
  // yet relative to what was used it holds everything: 1 preempts it.
  SliceScheduler scheduler = make_scheduler(Config{});
  ASSERT_TRUE(scheduler.join(1, 0.3, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.7, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  for (Nanos t = 0; t < kSecond; t += 2 * kMillisecond) {
    (void)scheduler.decide(t);
    ASSERT_TRUE(scheduler.charge(2, kMillisecond, t + kMillisecond).ok());
  }
  const Nanos grant_start = kSecond;
  ASSERT_EQ(scheduler.decide(grant_start).holder, std::optional<InstanceId>(2));
  const auto stats2 = scheduler.stats(2, grant_start);
  ASSERT_TRUE(stats2.ok());
  EXPECT_LT(stats2.value().achieved, 0.6);
  ASSERT_TRUE(scheduler.set_asking(1, true, grant_start + 2 * kMillisecond).ok());
  EXPECT_EQ(scheduler.decide(grant_start + 2 * kMillisecond).holder, std::optional<InstanceId>(1));
}

}  // namespace
}  // namespace egpu::faa::test
