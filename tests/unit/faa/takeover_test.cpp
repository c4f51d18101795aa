// Overdue takeover (rule 4 in slice_scheduler_decide.cpp), pending device
// time in the ordering key, and relative deviations on a fresh GPU.
#include <gtest/gtest.h>

#include "test_support.h"

namespace egpu::faa::test {
namespace {

constexpr Nanos kStep = 100 * kMicrosecond;

// No latency preemptions: only slice ends and takeovers move the slice.
Config without_preemption() {
  Config config;
  config.preempt_threshold = 1.0;
  return config;
}

struct Handover {
  Nanos at = kNever;           // when `to` got the slice
  Nanos grant_start = kNever;  // start of the grant it ended
  Nanos announced = kNever;    // the until that grant announced at its start
};

// 2 (20%) runs alone until 10 ms and is then above its share; 1 (80%) asks
// from then on and holds the GPU grant after grant while 2 waits and its key
// decays (before 2's wait deadline, 6 slices, forces a handover). With
// `pause_from` set, 2 stops asking from then to `pause_to`. Runs until 2 gets
// the slice back; the holder is charged as it runs.
Handover run_until_two_returns(SliceScheduler& scheduler, Nanos pause_from = kNever,
                               Nanos pause_to = kNever) {
  EXPECT_TRUE(scheduler.join(1, 0.8, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.join(2, 0.2, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.set_asking(2, true, 0).ok());
  std::uint64_t sequence = 0;
  Nanos grant_start = 0;
  Nanos announced = 0;
  std::optional<InstanceId> holder;
  for (Nanos t = 0; t < kSecond; t += kStep) {
    if (t == 10 * kMillisecond) {
      EXPECT_TRUE(scheduler.set_asking(1, true, t).ok());
    }
    if (t == pause_from || t == pause_to) {
      EXPECT_TRUE(scheduler.set_asking(2, t == pause_to, t).ok());
    }
    const Grant grant = scheduler.decide(t);
    if (grant.sequence != sequence) {
      if (holder == std::optional<InstanceId>(1) && grant.holder == std::optional<InstanceId>(2)) {
        return Handover{t, grant_start, announced};
      }
      sequence = grant.sequence;
      grant_start = t;
      announced = grant.until;
    }
    holder = grant.holder;
    if (holder) {
      EXPECT_TRUE(scheduler.charge(*holder, kStep, t + kStep).ok());
    }
  }
  ADD_FAILURE() << "2 never got the slice back";
  return Handover{};
}

TEST(Takeover, AnOverdueWaiterStartsWhenDueNotAtTheSliceEnd) {
  SliceScheduler scheduler = make_scheduler(without_preemption());
  const Handover h = run_until_two_returns(scheduler);
  ASSERT_NE(h.at, kNever);
  // Inside 1's grant, at the time announced when that grant began (to the
  // step), after min_hold: not at the slice end.
  EXPECT_GE(h.at, h.grant_start + scheduler.config().min_hold);
  EXPECT_LT(h.at, h.grant_start + kSlice);
  EXPECT_GE(h.at, h.announced);
  EXPECT_LE(h.at - h.announced, kStep);
  EXPECT_EQ(scheduler.preemptions(), 0U);
}

TEST(Takeover, ANewcomerWaitsForTheSliceEnd) {
  // Without the pause 2 takes over inside the grant that starts at 60 ms (the
  // test above). Pausing across that grant's start makes it a newcomer there:
  // it did not lose the decision that started the grant, so only a preemption
  // (off here) or the slice end gives it the slice.
  SliceScheduler scheduler = make_scheduler(without_preemption());
  const Handover h = run_until_two_returns(scheduler, 59 * kMillisecond, 61 * kMillisecond);
  ASSERT_NE(h.at, kNever);
  EXPECT_EQ(h.grant_start, 60 * kMillisecond);
  EXPECT_EQ(h.at, h.grant_start + kSlice);
}

TEST(Takeover, AnnouncedUntilIsStableWithoutChanges) {
  SliceScheduler scheduler = make_scheduler(without_preemption());
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.5, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(2, true, 0).ok());
  const Grant first = scheduler.decide(kMillisecond);
  const Grant again = scheduler.decide(kMillisecond);
  EXPECT_EQ(first.holder, again.holder);
  EXPECT_EQ(first.until, again.until);
  EXPECT_EQ(first.sequence, again.sequence);
}

// 1 and 2 at 50%; 1 ran a 10 ms grant, then 2 used 5 ms of its grant. Who goes
// next: without pending time 2 (it used less), with 10 ms of 2's work still
// queued 1 (that work will run whoever holds the slice).
std::optional<InstanceId> next_after_two_used_5ms(Nanos two_pending) {
  SliceScheduler scheduler = make_scheduler(without_preemption());
  EXPECT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.join(2, 0.5, Mode::kBurst, 0).ok());
  EXPECT_TRUE(scheduler.set_asking(1, true, 0).ok());
  EXPECT_TRUE(scheduler.set_asking(2, true, 0).ok());
  EXPECT_EQ(scheduler.decide(0).holder, std::optional<InstanceId>(1));
  EXPECT_TRUE(scheduler.charge(1, kSlice, kSlice).ok());
  EXPECT_EQ(scheduler.decide(kSlice).holder, std::optional<InstanceId>(2));
  EXPECT_TRUE(scheduler.charge(2, 5 * kMillisecond, 2 * kSlice).ok());
  EXPECT_TRUE(scheduler.set_pending(2, two_pending, 2 * kSlice).ok());
  return scheduler.decide(2 * kSlice).holder;
}

TEST(Pending, QueuedWorkCountsInTheOrder) {
  EXPECT_EQ(next_after_two_used_5ms(0), std::optional<InstanceId>(2));
  EXPECT_EQ(next_after_two_used_5ms(10 * kMillisecond), std::optional<InstanceId>(1));
}

TEST(Pending, BadCallsAreRefusedWithTheReason) {
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.5, Mode::kBurst, 0).ok());
  const Status negative = scheduler.set_pending(1, -1, 0);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("negative pending"), std::string::npos) << negative.error();
  const Status unknown = scheduler.set_pending(7, 0, 0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("instance 7"), std::string::npos) << unknown.error();
}

}  // namespace
}  // namespace egpu::faa::test

namespace egpu::faa::test {
namespace {

TEST(Preemption, NoneOnAFreshGpuBetweenInstancesNearTheirTargets) {
  // Both start at their targets; 1 (80%) runs 42 ms alone, then 2 (20%) asks
  // during 1's grant: 2 is 3 pp below 1 relative to use, short of the 5 pp
  // threshold, and waits for the slice end. (Counting
  // only the 42 ms of real use as the GPU's busy time once made that 700 pp.)
  SliceScheduler scheduler = make_scheduler();
  ASSERT_TRUE(scheduler.join(1, 0.8, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.join(2, 0.2, Mode::kBurst, 0).ok());
  ASSERT_TRUE(scheduler.set_asking(1, true, 0).ok());
  for (Nanos t = 0; t < 42 * kMillisecond; t += kStep) {
    ASSERT_EQ(scheduler.decide(t).holder, std::optional<InstanceId>(1));
    ASSERT_TRUE(scheduler.charge(1, kStep, t + kStep).ok());
  }
  ASSERT_TRUE(scheduler.set_asking(2, true, 42 * kMillisecond).ok());
  for (Nanos t = 42 * kMillisecond; t < 50 * kMillisecond; t += kStep) {
    EXPECT_EQ(scheduler.decide(t).holder, std::optional<InstanceId>(1)) << t;
    ASSERT_TRUE(scheduler.charge(1, kStep, t + kStep).ok());
  }
  EXPECT_EQ(scheduler.preemptions(), 0U);
}

}  // namespace
}  // namespace egpu::faa::test
