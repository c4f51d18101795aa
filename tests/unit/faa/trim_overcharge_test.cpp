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

TEST(TrimOvercharge, HandoverOverlapComesOffTheLargerCharge) {
  // 10 ms passed; the holder measured 8 ms and the newcomer 4 ms: each
  // counted the same 1 ms overlap. Both are cut to the level at which they
  // add up to 10 ms; the newcomer's 4 ms are below it.
  int64_t credit = 10'000'000;
  auto out = trim_overcharge({8'000'000, 4'000'000}, &credit);
  EXPECT_EQ(out[0], 6'000'000);
  EXPECT_EQ(out[1], 4'000'000);
  EXPECT_EQ(credit, 0);
}

TEST(TrimOvercharge, NeverTakesMoreThanAnInstanceWasCharged) {
  int64_t credit = 5'000'000;
  auto out = trim_overcharge({9'000'000, 500'000, 0}, &credit);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[1], 500'000);
  EXPECT_EQ(out[0], 4'500'000);
  EXPECT_EQ(credit, 0);
}

// A job that reports a second of device time in a 10 ms tick: a neighbour
// keeps what it used up to the common level (10 ms over those charged at
// or above it), never less; taken equally from everyone, the lie would have
// cancelled their charges (they kept 0 ms here).
TEST(TrimOvercharge, AnOverReportCannotCutANeighbourBelowTheCommonLevel) {
  int64_t credit = 10'000'000;
  auto out = trim_overcharge({3'000'000, 1'000'000'000, 4'000'000}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{3'000'000, 3'500'000, 3'500'000}));
  credit = 10'000'000;
  out = trim_overcharge({2'000'000, 1'000'000'000, 3'000'000}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{2'000'000, 5'000'000, 3'000'000}));
  credit = 10'000'000;
  out = trim_overcharge({INT64_MAX, 2'000'000, INT64_MAX}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{4'000'000, 2'000'000, 4'000'000}));
  // Levels that do not divide: the remainder goes to the first of them.
  credit = 10;
  out = trim_overcharge({100, 100, 100}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{4, 3, 3}));
}

TEST(TrimOvercharge, NoCreditChargesNothing) {
  int64_t credit = 0;
  auto out = trim_overcharge({1'000, 2'000}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{0, 0}));
}

}  // namespace
}  // namespace egpu::faa
