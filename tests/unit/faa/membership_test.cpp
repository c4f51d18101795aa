// Joining, leaving and resizing, and what is refused with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

bool mentions(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

TEST(Join, StartsAtZeroDeviationEvenOnABusyGpu) {
  sim::FaaSim sim(sim::SimOptions{});
  sim.add(0.4, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  sim.run_until(kSecond);
  // The greedy one has been far above its 40% for a second.
  const Result<InstanceStats> busy = sim.scheduler().stats(sim.id(0), kSecond);
  ASSERT_TRUE(busy.ok());
  EXPECT_GT(busy.value().deviation, 0.5);
  const std::size_t joiner = sim.add(0.3, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  const Result<InstanceStats> joined = sim.scheduler().stats(sim.id(joiner), kSecond);
  ASSERT_TRUE(joined.ok());
  EXPECT_NEAR(joined.value().deviation, 0.0, 1e-12);
  EXPECT_NEAR(joined.value().achieved, 0.0, 1e-12);  // what it ran: nothing yet
  // Neither owed nor owing: from a second after joining both hold the 4:3
  // split of the whole GPU their targets give them (the spare 30% shared).
  sim.run_until(2500 * kMillisecond);
  const double joiner_share = sim.share(joiner, 2 * kSecond, 2500 * kMillisecond);
  const double busy_share = sim.share(0, 2 * kSecond, 2500 * kMillisecond);
  EXPECT_NEAR(joiner_share + busy_share, 1.0, 0.001);
  EXPECT_NEAR(joiner_share, 3.0 / 7.0, 0.02);
}

TEST(Leave, FreesTheShareAtOnce) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::vector<std::size_t> ids = add_greedy(sim, {50, 25, 25});
  sim.run_until(kSecond);
  sim.remove(ids[0]);
  sim.run_until(1500 * kMillisecond);
  // Right after the leave the other two use the whole GPU, half each.
  EXPECT_EQ(sim.used(ids[0], kSecond + kMillisecond, 1500 * kMillisecond), 0);
  const Nanos from = kSecond + kSlice;
  EXPECT_NEAR(
      sim.share(ids[1], from, 1500 * kMillisecond) + sim.share(ids[2], from, 1500 * kMillisecond),
      1.0, 0.001);
  EXPECT_NEAR(sim.share(ids[1], from, 1500 * kMillisecond), 0.5, 0.03);
}

TEST(Leave, HolderLeavingIsReplacedAtTheNextDecision) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(7, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(8, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(7, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(8, true, 0).ok());
  ASSERT_EQ(scheduler.decide(0).holder, std::optional<InstanceId>(7));
  ASSERT_TRUE(scheduler.leave(7, 2 * kMillisecond).ok());
  EXPECT_FALSE(scheduler.contains(7));
  const Grant next = scheduler.decide(2 * kMillisecond);
  EXPECT_EQ(next.holder, std::optional<InstanceId>(8));
  EXPECT_EQ(next.until, 2 * kMillisecond + kSlice);
  EXPECT_NEAR(scheduler.gpu_stats(2 * kMillisecond).allocated, 0.5, 1e-12);
  // Its share can be given again.
  EXPECT_TRUE(scheduler.join(9, 0.5, Mode::kCap, 2 * kMillisecond).ok());
}

// Two instances equal in key and wait: the lower id goes first, whatever
// order they joined in and whoever left before. The tie went to the first in
// the scheduler's own array, which a leave reorders (the last takes the
// leaver's place) and a restarted agent rebuilds in slot order: the same
// state broke the same tie one way before a restart and the other after.
TEST(Leave, ATieGoesToTheLowerIdWhateverLeftBefore) {
  const auto first_holder = [](const std::vector<InstanceId>& joins,
                               std::optional<InstanceId> gone) {
    SliceScheduler scheduler = make_scheduler();
    for (const InstanceId id : joins)
      EXPECT_TRUE(scheduler.join(id, 0.3, Mode::kBurst, 0).ok());
    if (gone) {
      EXPECT_TRUE(scheduler.leave(*gone, 0).ok());
    }
    EXPECT_TRUE(scheduler.set_asking(2, true, kMillisecond).ok());
    EXPECT_TRUE(scheduler.set_asking(3, true, kMillisecond).ok());
    return scheduler.decide(kMillisecond).holder;
  };
  EXPECT_EQ(first_holder({1, 2, 3}, 1), std::optional<InstanceId>(2));  // 3 moved to 1's place
  EXPECT_EQ(first_holder({2, 3}, std::nullopt), std::optional<InstanceId>(2));
  EXPECT_EQ(first_holder({3, 2}, std::nullopt), std::optional<InstanceId>(2));  // a restart's order
}

TEST(Leave, OtherInstancesKeepTheirStateWhenOneInTheMiddleLeaves) {
  SliceScheduler scheduler = make_scheduler();
  for (InstanceId id = 1; id <= 4; ++id) {
    ASSERT_TRUE(scheduler.join(id, 0.25, Mode::kBurst, 0).ok());
  }
  ASSERT_TRUE(scheduler.charge(4, 5 * kMillisecond, kMillisecond).ok());
  ASSERT_TRUE(scheduler.leave(2, kMillisecond).ok());
  const Result<InstanceStats> moved = scheduler.stats(4, kMillisecond);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved.value().id, 4U);
  EXPECT_EQ(moved.value().charged, 5 * kMillisecond);
  EXPECT_EQ(scheduler.size(), 3U);
  EXPECT_FALSE(scheduler.stats(2, kMillisecond).ok());
}

TEST(Refusals, UnknownInstances) {
  SliceScheduler scheduler = make_scheduler();
  const Status resized = scheduler.resize(42, 0.5, Mode::kBurst, 0);
  EXPECT_FALSE(resized.ok());
  EXPECT_TRUE(mentions(resized.error(), "cannot resize instance 42")) << resized.error();
  EXPECT_TRUE(mentions(resized.error(), "no such instance")) << resized.error();
  EXPECT_TRUE(mentions(scheduler.leave(42, 0).error(), "cannot remove instance 42"));
  EXPECT_TRUE(mentions(scheduler.set_asking(42, true, 0).error(), "instance 42"));
  EXPECT_TRUE(mentions(scheduler.charge(42, 1, 0).error(), "cannot charge instance 42"));
  EXPECT_TRUE(mentions(scheduler.stats(42, 0).error(), "instance 42"));
}

TEST(Refusals, InvalidTargets) {
  SliceScheduler scheduler = make_scheduler();
  for (const double bad : {0.0, -0.3, 1.01, std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity()}) {
    const Status status = scheduler.join(1, bad, Mode::kBurst, 0);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_TRUE(mentions(status.error(), "out of range")) << status.error();
  }
  ASSERT_TRUE(scheduler.join(1, 0.6, Mode::kBurst, 0).ok());
  const Status resized = scheduler.resize(1, 0.0, Mode::kCap, 0);
  EXPECT_FALSE(resized.ok());
  EXPECT_TRUE(mentions(resized.error(), "cannot resize instance 1")) << resized.error();
  // Refused changes leave the instance as it was.
  const Result<InstanceStats> kept = scheduler.stats(1, 0);
  ASSERT_TRUE(kept.ok());
  EXPECT_DOUBLE_EQ(kept.value().target, 0.6);
  EXPECT_EQ(kept.value().mode, Mode::kBurst);
}

TEST(Refusals, OversubscriptionAndDuplicates) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.7, Mode::kBurst, 0).ok());
  const Status over = scheduler.join(2, 0.31, Mode::kBurst, 0);
  EXPECT_FALSE(over.ok());
  EXPECT_TRUE(mentions(over.error(), "does not fit")) << over.error();
  ASSERT_TRUE(scheduler.join(2, 0.3, Mode::kBurst, 0).ok());
  EXPECT_FALSE(scheduler.resize(2, 0.4, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.resize(2, 0.3, Mode::kCap, 0).ok());
  const Status twice = scheduler.join(1, 0.1, Mode::kBurst, 0);
  EXPECT_FALSE(twice.ok());
  EXPECT_TRUE(mentions(twice.error(), "already")) << twice.error();
}

TEST(Refusals, NegativeCharge) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  const Status status = scheduler.charge(1, -5, 0);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(mentions(status.error(), "negative")) << status.error();
}

}  // namespace
}  // namespace egpu::faa::test
