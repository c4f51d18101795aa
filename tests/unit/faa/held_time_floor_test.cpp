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
