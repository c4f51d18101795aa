// All instances asking continuously: shares, waits, resizes and idle instances.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

constexpr Nanos kRun = 2 * kSecond;

// All instances greedy from time 0 for 2 s: whole-run shares within 0.5 pp.
void expect_shares_within_half_point(const std::vector<int>& units) {
  sim::FaaSim sim(sim::SimOptions{});
  add_greedy(sim, units);
  sim.run_until(kRun);
  for (std::size_t i = 0; i < units.size(); ++i) {
    EXPECT_NEAR(sim.share(i, 0, kRun), units[i] / 100.0, 0.005)
        << "instance " << i << " with target " << units[i] << "%";
  }
}

// Same runs: nobody waits more than ceil(1/share) + 1 slices between grants.
void expect_bounded_waits(const std::vector<int>& units) {
  sim::FaaSim sim(sim::SimOptions{});
  add_greedy(sim, units);
  sim.run_until(kRun);
  for (std::size_t i = 0; i < units.size(); ++i) {
    EXPECT_LE(sim.longest_wait(i), wait_bound(units[i] / 100.0))
        << "instance " << i << " with target " << units[i] << "%";
    EXPECT_GE(sim.grant_times(i).size(), 2U) << "instance " << i << " was hardly served";
  }
}

const std::vector<int> k50x2 = {50, 50};
const std::vector<int> k70_30 = {70, 30};
const std::vector<int> k90_10 = {90, 10};
const std::vector<int> k20x5 = {20, 20, 20, 20, 20};
const std::vector<int> k10x10 = {10, 10, 10, 10, 10, 10, 10, 10, 10, 10};
const std::vector<int> k1_99 = {1, 99};

TEST(SteadyShares, Split50_50) {
  expect_shares_within_half_point(k50x2);
}
TEST(SteadyShares, Split70_30) {
  expect_shares_within_half_point(k70_30);
}
TEST(SteadyShares, Split90_10) {
  expect_shares_within_half_point(k90_10);
}
TEST(SteadyShares, Split5x20) {
  expect_shares_within_half_point(k20x5);
}
TEST(SteadyShares, Split10x10) {
  expect_shares_within_half_point(k10x10);
}
TEST(SteadyShares, Split1_99) {
  expect_shares_within_half_point(k1_99);
}

TEST(BoundedWait, Split50_50) {
  expect_bounded_waits(k50x2);
}
TEST(BoundedWait, Split70_30) {
  expect_bounded_waits(k70_30);
}
TEST(BoundedWait, Split90_10) {
  expect_bounded_waits(k90_10);
}
TEST(BoundedWait, Split5x20) {
  expect_bounded_waits(k20x5);
}
TEST(BoundedWait, Split10x10) {
  expect_bounded_waits(k10x10);
}
TEST(BoundedWait, Split1_99) {
  expect_bounded_waits(k1_99);
}

TEST(Resize, NewSharesWithinOnePointFromOneSecondAfter) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::vector<std::size_t> ids = add_greedy(sim, {70, 30});
  sim.run_until(1 * kSecond);
  EXPECT_NEAR(sim.share(ids[0], 500 * kMillisecond, kSecond), 0.70, 0.01);
  // Shrink first so the sum never exceeds the GPU.
  sim.resize(ids[0], 0.30, Mode::kBurst);
  sim.resize(ids[1], 0.70, Mode::kBurst);
  sim.run_until(2500 * kMillisecond);
  EXPECT_NEAR(sim.share(ids[0], 2 * kSecond, 2500 * kMillisecond), 0.30, 0.01);
  EXPECT_NEAR(sim.share(ids[1], 2 * kSecond, 2500 * kMillisecond), 0.70, 0.01);
}

TEST(Resize, TakesEffectAtTheNextDecision) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  ASSERT_EQ(scheduler.decide(0).holder, std::optional<InstanceId>(1));
  ASSERT_TRUE(scheduler.charge(1, kSlice, kSlice).ok());
  ASSERT_TRUE(scheduler.resize(2, 0.1, Mode::kBurst, kSlice).ok());
  ASSERT_TRUE(scheduler.resize(1, 0.9, Mode::kBurst, kSlice).ok());
  const Result<InstanceStats> stats = scheduler.stats(1, kSlice);
  ASSERT_TRUE(stats.ok());
  EXPECT_DOUBLE_EQ(stats.value().target, 0.9);
  // The deviation is kept (the joining 50% decayed over one slice plus the
  // slice it used, over tau, less 50%); what it ran is the slice it used.
  const double decay = std::exp(-static_cast<double>(kSlice) / (500.0 * kMillisecond));
  EXPECT_NEAR(stats.value().deviation, 0.5 * decay + 0.02 - 0.5, 1e-9);
  EXPECT_NEAR(stats.value().achieved, 0.02, 1e-9);
  // From the next decision on, grants go 9:1.
  std::map<InstanceId, int> grants;
  for (Nanos now = kSlice; now < 41 * kSlice; now += kSlice) {
    const auto holder = scheduler.decide(now).holder;
    ASSERT_TRUE(holder.has_value());
    ++grants[*holder];
    ASSERT_TRUE(scheduler.charge(*holder, kSlice, now + kSlice).ok());
  }
  EXPECT_NEAR(grants[1], 36, 1);
  EXPECT_NEAR(grants[2], 4, 1);
}

// A loan lent and given back (or an umbrella's step come and gone) leaves an
// idle instance's deviation as it was: clamped at no usage, the shrink was
// lost and the grow gave it 40 points it never ran.
TEST(Resize, AShrinkAndAGrowBackLeaveTheDeviation) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  const Nanos later = 10 * kSecond;  // 20 tau idle: nothing of its credit left
  const double before = scheduler.stats(1, later).value().deviation;
  ASSERT_TRUE(scheduler.resize(1, 0.1, Mode::kBurst, later).ok());
  ASSERT_TRUE(scheduler.resize(1, 0.5, Mode::kBurst, later).ok());
  EXPECT_NEAR(scheduler.stats(1, later).value().deviation, before, 1e-9);
  EXPECT_NEAR(scheduler.stats(1, later).value().achieved, 0.0, 1e-9);
}

// The shares follow the new targets at once, with no echo: kept as it was,
// the grown instance's history got it its new share's worth back from the
// other (0.83 of the GPU over the next 300 ms for a 70% target).
TEST(Resize, NoEchoAfterwards) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::vector<std::size_t> ids = add_greedy(sim, {70, 30});
  sim.run_until(1 * kSecond);
  sim.resize(ids[0], 0.30, Mode::kBurst);
  sim.resize(ids[1], 0.70, Mode::kBurst);
  sim.run_until(1300 * kMillisecond);
  EXPECT_NEAR(sim.share(ids[0], kSecond, 1300 * kMillisecond), 0.30, 0.02);
  EXPECT_NEAR(sim.share(ids[1], kSecond, 1300 * kMillisecond), 0.70, 0.02);
}

// A job may move its units between its own steps at will (egpuctl resize):
// flipping 49 and 1 units between two greedy steps every 50 ms must not
// take the neighbour's time. It did: each grown step got its new share's
// worth of history back from the neighbour, who kept 0.34 of the GPU.
TEST(Resize, FlippingUnitsBetweenOwnStepsTakesNothingFromANeighbour) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::vector<std::size_t> ids = add_greedy(sim, {50, 49, 1});
  const std::size_t victim = ids[0];
  bool flipped = false;
  for (Nanos t = 50 * kMillisecond; t <= 5 * kSecond; t += 50 * kMillisecond) {
    sim.run_until(t);
    flipped = !flipped;
    // Shrink first so the sum never exceeds the GPU.
    sim.resize(ids[flipped ? 1 : 2], 0.01, Mode::kBurst);
    sim.resize(ids[flipped ? 2 : 1], 0.49, Mode::kBurst);
  }
  EXPECT_GE(sim.share(victim, kSecond, 5 * kSecond), 0.49);
}

TEST(IdleInstance, ItsShareGoesToTheOthers) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t idle = sim.add(0.30, Mode::kBurst, sim::Workload::idle());
  const std::size_t busy = sim.add(0.70, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  sim.run_until(kRun);
  EXPECT_EQ(sim.used(idle, 0, kRun), 0);
  EXPECT_GE(sim.share(busy, 0, kRun), 0.995);
}

TEST(IdleInstance, UnallocatedCapacityGoesToBurstInstances) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::vector<std::size_t> ids = add_greedy(sim, {20, 30});
  sim.run_until(kRun);
  const double first = sim.share(ids[0], 0, kRun);
  const double second = sim.share(ids[1], 0, kRun);
  EXPECT_NEAR(first + second, 1.0, 0.005);
  // Each keeps at least its target; the spare 50% is shared by the two.
  EXPECT_GE(first, 0.20);
  EXPECT_GE(second, 0.30);
}

}  // namespace
}  // namespace egpu::faa::test
