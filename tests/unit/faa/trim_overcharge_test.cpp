#include <gtest/gtest.h>

#include "core/faa/arbiter_policy.h"

namespace egpu::faa {
namespace {

TEST(TrimOvercharge, WithinCreditNothingChanges) {
  int64_t credit = 10'000'000;
  auto out = trim_overcharge({7'000'000, 3'000'000}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{7'000'000, 3'000'000}));
  EXPECT_EQ(credit, 0);
}

TEST(TrimOvercharge, HandoverOverlapIsTakenEquallyFromBoth) {
  // 10 ms passed; the holder measured 8 ms and the newcomer 4 ms: each
  // counted the same 1 ms overlap.
  int64_t credit = 10'000'000;
  auto out = trim_overcharge({8'000'000, 4'000'000}, &credit);
  EXPECT_EQ(out[0], 7'000'000);
  EXPECT_EQ(out[1], 3'000'000);
  EXPECT_EQ(credit, 0);
}

TEST(TrimOvercharge, NeverTakesMoreThanAnInstanceWasCharged) {
  int64_t credit = 5'000'000;
  auto out = trim_overcharge({9'000'000, 500'000, 0}, &credit);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[0] + out[1], 5'000'000);
  EXPECT_EQ(credit, 0);
}

TEST(TrimOvercharge, NoCreditChargesNothing) {
  int64_t credit = 0;
  auto out = trim_overcharge({1'000, 2'000}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{0, 0}));
}

}  // namespace
}  // namespace egpu::faa
