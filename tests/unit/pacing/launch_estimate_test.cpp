#include "core/pacing/launch_estimate.h"

#include <gtest/gtest.h>

namespace egpu::pacing {
namespace {

constexpr int64_t kLimit = 2'000'000;

TEST(LaunchEstimate, FirstSegmentSetsTheEstimate) {
  LaunchEstimate e(0.25);
  EXPECT_FALSE(e.known());
  e.add_segment(1000, 10);
  EXPECT_TRUE(e.known());
  EXPECT_EQ(e.per_launch_ns(), 100);
}

TEST(LaunchEstimate, LaterSegmentsMoveItByTheWeight) {
  LaunchEstimate e(0.25);
  e.add_segment(1000, 10);  // 100
  e.add_segment(5000, 10);  // sample 500: 100 + 0.25 * 400
  EXPECT_EQ(e.per_launch_ns(), 200);
}

TEST(LaunchEstimate, EmptySegmentsAreIgnored) {
  LaunchEstimate e(0.25);
  e.add_segment(1000, 0);
  EXPECT_FALSE(e.known());
}

TEST(LaunchEstimate, SeedOnlyWhenUnknown) {
  LaunchEstimate e(0.25);
  e.seed(300);
  EXPECT_EQ(e.per_launch_ns(), 300);
  e.seed(900);
  EXPECT_EQ(e.per_launch_ns(), 300);
}

TEST(MarkerInterval, UnknownDurationsMeasureEveryLaunch) {
  LaunchEstimate e(0.25);
  EXPECT_EQ(marker_interval(e, kLimit, 64), 1u);
}

TEST(MarkerInterval, MarkersAreAQuarterOfTheLimitApart) {
  LaunchEstimate e(0.25);
  e.add_segment(10'000, 1);  // 10 us per launch: 500 us / 10 us
  EXPECT_EQ(marker_interval(e, kLimit, 64), 50u);
  LaunchEstimate longer(0.25);
  longer.add_segment(100'000, 1);
  EXPECT_EQ(marker_interval(longer, kLimit, 64), 5u);
}

TEST(MarkerInterval, ClampedToOneAndTheMaximum) {
  LaunchEstimate big(0.25);
  big.add_segment(5'000'000, 1);
  EXPECT_EQ(marker_interval(big, kLimit, 64), 1u);
  LaunchEstimate tiny(0.25);
  tiny.add_segment(100, 1);
  EXPECT_EQ(marker_interval(tiny, kLimit, 64), 64u);
  LaunchEstimate zero(0.25);
  zero.add_segment(0, 64);
  EXPECT_EQ(marker_interval(zero, kLimit, 64), 64u);
}

TEST(BoundLaunch, UnknownIsHalfTheLimit) {
  LaunchEstimate e(0.25);
  EXPECT_EQ(bound_launch_ns(e, kLimit), kLimit / 2);
  e.add_segment(700, 1);
  EXPECT_EQ(bound_launch_ns(e, kLimit), 700);
}

}  // namespace
}  // namespace egpu::pacing
