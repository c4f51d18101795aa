#include "core/pacing/coverage.h"

#include <gtest/gtest.h>

namespace egpu::pacing {
namespace {

TEST(Coverage, DisjointIntervalsAreChargedWhole) {
  Coverage c;
  EXPECT_EQ(c.add(0, 10), 10);
  EXPECT_EQ(c.add(20, 30), 10);
  EXPECT_EQ(c.interval_count(), 2u);
}

TEST(Coverage, AdjacentIntervalsMerge) {
  Coverage c;
  EXPECT_EQ(c.add(0, 10), 10);
  EXPECT_EQ(c.add(10, 25), 15);
  EXPECT_EQ(c.interval_count(), 1u);
}

TEST(Coverage, OverlapIsChargedOnce) {
  Coverage c;
  EXPECT_EQ(c.add(0, 10), 10);
  EXPECT_EQ(c.add(5, 15), 5);
  EXPECT_EQ(c.add(2, 8), 0);
  EXPECT_EQ(c.add(-5, 20), 10);  // 5 before, 5 after
  EXPECT_EQ(c.interval_count(), 1u);
}

TEST(Coverage, SpanningSeveralIntervalsCountsOnlyTheHoles) {
  Coverage c;
  c.add(0, 10);
  c.add(20, 30);
  c.add(40, 50);
  EXPECT_EQ(c.add(5, 45), 20);  // holes 10-20 and 30-40
  EXPECT_EQ(c.interval_count(), 1u);
}

TEST(Coverage, OutOfOrderArrivalStillCountsOnce) {
  Coverage c;
  EXPECT_EQ(c.add(100, 200), 100);
  EXPECT_EQ(c.add(0, 150), 100);
  EXPECT_EQ(c.add(50, 120), 0);
}

TEST(Coverage, EmptyOrReversedIntervalsChargeNothing) {
  Coverage c;
  EXPECT_EQ(c.add(10, 10), 0);
  EXPECT_EQ(c.add(10, 5), 0);
  EXPECT_EQ(c.interval_count(), 0u);
}

TEST(Coverage, KeepsABoundedHistory) {
  Coverage c(4);
  for (int i = 0; i < 10; ++i)
    c.add(i * 10, i * 10 + 5);
  EXPECT_EQ(c.interval_count(), 4u);
  // The newest ones are kept.
  EXPECT_EQ(c.add(90, 95), 0);
}

}  // namespace
}  // namespace egpu::pacing
