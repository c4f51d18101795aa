// HeldTimeFloor: what a holder whose reports fall short of the time it held
// the slice is charged (issue 10, finding 4).
#include "core/faa/held_time_floor.h"

#include <gtest/gtest.h>

namespace egpu::faa {
namespace {

constexpr Nanos kTick = 500'000;  // the agent's contended poll

HeldTimeFloorParams params() {
  return {.rate = 0.95, .allowance = 100 * kMillisecond};
}

TEST(HeldTimeFloor, AnHonestHolderIsChargedExactlyWhatItReports) {
  HeldTimeFloor floor(params());
  Nanos charged = 0;
  Nanos reported = 0;
  for (int i = 0; i < 100'000; ++i) {  // 50 s held, 3% of it gaps
    const Nanos r = kTick * 97 / 100;
    charged += floor.settle(r, kTick);
    reported += r;
  }
  EXPECT_EQ(charged, reported);
  EXPECT_EQ(floor.floor_charged(), 0);
}

TEST(HeldTimeFloor, AHolderThatReportsNothingPaysForTheTimeItHeld) {
  HeldTimeFloor floor(params());
  Nanos charged = 0;
  const int ticks = 20'000;  // 10 s held
  for (int i = 0; i < ticks; ++i)
    charged += floor.settle(0, kTick);
  const Nanos held = ticks * kTick;
  // All of it at the floor's rate, but for the allowance.
  EXPECT_NEAR(static_cast<double>(charged), 0.95 * held - 100 * kMillisecond, 1e3);
  EXPECT_EQ(floor.floor_charged(), charged);
}

// Each 10 ms grant: 3 ms before the woken thread runs (a busy host), then
// 7 ms of work reported. Only the reports are charged.
TEST(HeldTimeFloor, AHolderWokenLateIsNotChargedForTheTimeItDidNotRun) {
  HeldTimeFloor floor(params());
  Nanos charged = 0;
  Nanos reported = 0;
  for (int grant = 0; grant < 2000; ++grant) {  // 20 s
    for (int t = 0; t < 6; ++t)
      charged += floor.settle(0, kTick, kTick);
    for (int t = 0; t < 14; ++t) {
      charged += floor.settle(kTick, kTick);
      reported += kTick;
    }
  }
  EXPECT_EQ(charged, reported);
  EXPECT_EQ(floor.floor_charged(), 0);
}

// Waking time is forgiven only out of what was reported: a holder that
// never launches nor reports pays for it as for any held time.
TEST(HeldTimeFloor, WakingWithoutReportsIsCharged) {
  HeldTimeFloor floor(params());
  Nanos charged = 0;
  for (int i = 0; i < 20'000; ++i)
    charged += floor.settle(0, kTick, kTick);
  EXPECT_NEAR(static_cast<double>(charged), 0.95 * 20'000 * kTick - 100 * kMillisecond, 1e3);
}

// Reporting time it did not use buys waking time at half of it: a liar pays
// at least 1/1.5 of what it holds.
TEST(HeldTimeFloor, FakeReportsBuyAtMostHalfAsMuchWakingTime) {
  HeldTimeFloor floor(params());
  Nanos charged = 0;
  Nanos held = 0;
  for (int i = 0; i < 20'000; ++i) {
    charged += floor.settle(kTick / 2, kTick, kTick);  // claims half, "waking" all of it
    held += kTick;
  }
  EXPECT_GE(static_cast<double>(charged), 0.95 * held / 1.5 - 100 * kMillisecond);
}

TEST(HeldTimeFloor, ATrickleOfReportsDoesNotBuyTheRest) {
  HeldTimeFloor floor(params());
  Nanos charged = 0;
  const int ticks = 20'000;
  for (int i = 0; i < ticks; ++i)
    charged += floor.settle(1, kTick);  // 1 ns a tick
  EXPECT_GE(charged, static_cast<Nanos>(0.95 * ticks * kTick) - 100 * kMillisecond);
}

TEST(HeldTimeFloor, ALongKernelIsChargedInAdvanceAndOnlyOnce) {
  HeldTimeFloor floor(params());
  // A 2 s kernel (an NCCL collective waiting for a straggler): nothing is
  // reported while it runs, all of it when it ends.
  Nanos charged = 0;
  for (int i = 0; i < 4000; ++i)
    charged += floor.settle(0, kTick);
  const Nanos in_advance = charged;
  EXPECT_GT(in_advance, 1'500 * kMillisecond);
  charged += floor.settle(2'000 * kMillisecond, 0);
  EXPECT_EQ(charged, 2'000 * kMillisecond);
  EXPECT_EQ(floor.prepaid(), 0);
}

TEST(HeldTimeFloor, TimeNotHeldCostsNothing) {
  HeldTimeFloor floor(params());
  for (int i = 0; i < 10'000; ++i)
    EXPECT_EQ(floor.settle(0, 0), 0);
  EXPECT_EQ(floor.settle(7, 0), 7);
  EXPECT_EQ(floor.owed(), 0);
}

TEST(HeldTimeFloor, NegativeInputsAreTakenAsNothing) {
  HeldTimeFloor floor(params());
  EXPECT_EQ(floor.settle(-5, -kTick), 0);
  EXPECT_EQ(floor.owed(), 0);
  EXPECT_EQ(floor.prepaid(), 0);
}

}  // namespace
}  // namespace egpu::faa
