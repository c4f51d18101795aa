// What the scheduler reports, and how it treats odd calls.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

TEST(Stats, CountsGrantsChargesThrottlingAndWaits) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.5, Mode::kCap, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  ASSERT_EQ(scheduler.decide(0).holder, std::optional<InstanceId>(1));
  ASSERT_TRUE(scheduler.charge(1, kSlice, kSlice).ok());
  ASSERT_EQ(scheduler.decide(kSlice).holder, std::optional<InstanceId>(2));
  ASSERT_TRUE(scheduler.charge(2, 4 * kMillisecond, 14 * kMillisecond).ok());

  const Result<InstanceStats> first = scheduler.stats(1, 14 * kMillisecond);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value().grants, 1U);
  EXPECT_EQ(first.value().charged, kSlice);
  EXPECT_TRUE(first.value().asking);
  EXPECT_FALSE(first.value().holding);
  // Waiting since its slice ended at 10 ms.
  EXPECT_EQ(first.value().throttled, 4 * kMillisecond);
  EXPECT_EQ(first.value().longest_wait, 4 * kMillisecond);
  EXPECT_EQ(first.value().mode, Mode::kBurst);

  const Result<InstanceStats> second = scheduler.stats(2, 14 * kMillisecond);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.value().holding);
  EXPECT_EQ(second.value().throttled, kSlice);  // waited the first slice
  EXPECT_EQ(second.value().longest_wait, kSlice);
  // Full bucket (10 ms), refilled at 50% for 14 ms but capped, less 4 ms.
  EXPECT_EQ(second.value().cap_tokens, 6 * kMillisecond);
  // It ran 4 ms; the scheduler reckons with its joining 50% too.
  const double decay = std::exp(-14.0 / 500.0);
  EXPECT_NEAR(second.value().achieved, 4.0 / 500.0, 1e-9);
  EXPECT_NEAR(second.value().deviation, 0.5 * decay + 4.0 / 500.0 - 0.5, 1e-9);

  const GpuStats gpu = scheduler.gpu_stats(14 * kMillisecond);
  EXPECT_EQ(gpu.holder, std::optional<InstanceId>(2));
  EXPECT_EQ(gpu.holder_since, kSlice);
  EXPECT_EQ(gpu.holder_until, 2 * kSlice);
  EXPECT_EQ(gpu.instances, 2U);
  EXPECT_EQ(gpu.asking, 2U);
  EXPECT_EQ(gpu.grants, 2U);
  EXPECT_NEAR(gpu.allocated, 1.0, 1e-12);
  // 10 ms charged at 10 ms and 4 ms at 14 ms, decayed to 14 ms, over tau.
  EXPECT_NEAR(gpu.utilisation, (10.0 * std::exp(-4.0 / 500.0) + 4.0) / 500.0, 1e-9);
}

TEST(Stats, UtilisationFollowsTheDevice) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t bursty = sim.add(
      0.5, Mode::kBurst, sim::Workload::bursts(3 * kMillisecond, 10 * kMillisecond, 0, kSimKernel));
  sim.run_until(3 * kSecond);
  // 30% busy for 6 tau: the decayed utilisation has settled there.
  EXPECT_NEAR(sim.scheduler().gpu_stats(sim.now()).utilisation, 0.3, 0.01);
  const Result<InstanceStats> stats = sim.scheduler().stats(sim.id(bursty), sim.now());
  ASSERT_TRUE(stats.ok());
  EXPECT_NEAR(stats.value().achieved, 0.3, 0.01);
  EXPECT_EQ(stats.value().grants, 300U);  // one per burst
}

TEST(Decide, IdempotentWithoutChanges) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.3, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.7, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  const Grant first = scheduler.decide(kMillisecond);
  const Grant again = scheduler.decide(kMillisecond);
  const Grant later = scheduler.decide(5 * kMillisecond);
  EXPECT_EQ(first.holder, again.holder);
  EXPECT_EQ(first.until, again.until);
  EXPECT_EQ(first.sequence, again.sequence);
  EXPECT_EQ(later.sequence, first.sequence);
  EXPECT_EQ(later.until, kMillisecond + kSlice);
}

TEST(Decide, NobodyAskingMeansNoHolderAndNoDeadline) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.3, Mode::kBurst, 0).ok());
  const Grant grant = scheduler.decide(0);
  EXPECT_FALSE(grant.holder.has_value());
  EXPECT_EQ(grant.until, kNever);
  EXPECT_EQ(grant.sequence, 0U);
}

TEST(Decide, SameHolderAgainIsANewGrant) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.3, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  const Grant first = scheduler.decide(0);
  const Grant second = scheduler.decide(kSlice);
  EXPECT_EQ(first.holder, second.holder);
  EXPECT_EQ(second.sequence, first.sequence + 1);
  EXPECT_EQ(second.until, 2 * kSlice);
}

TEST(Decide, EarlierTimesAreTreatedAsTheLatestSeen) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  ASSERT_EQ(scheduler.decide(0).holder, std::optional<InstanceId>(1));
  ASSERT_TRUE(scheduler.charge(1, kSlice, kSlice).ok());
  const Grant at_end = scheduler.decide(kSlice);
  ASSERT_EQ(at_end.holder, std::optional<InstanceId>(2));
  // A stale caller: no rewind, no re-decision, same answer.
  const Grant stale = scheduler.decide(kSlice / 2);
  EXPECT_EQ(stale.holder, at_end.holder);
  EXPECT_EQ(stale.sequence, at_end.sequence);
  const Result<InstanceStats> stats = scheduler.stats(1, kSlice);
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(std::isfinite(stats.value().achieved));
}

}  // namespace
}  // namespace egpu::faa::test
