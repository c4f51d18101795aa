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

// The holder ran the whole tick and said so; an instance that did not hold
// the GPU says it ran a second. The holder keeps all it reported; the
// others share what is left.
TEST(TrimOvercharge, TheHolderIsServedBeforeTheOthers) {
  int64_t credit = 10'000'000;
  auto out = trim_overcharge({1'000'000'000, 10'000'000, 1'000'000'000}, &credit, 1);
  EXPECT_EQ(out, (std::vector<int64_t>{0, 10'000'000, 0}));
  EXPECT_EQ(credit, 0);
  // A tail of the last holder's beside the new holder's 8 ms: the tail
  // shares the 2 ms left with the liar.
  credit = 10'000'000;
  out = trim_overcharge({1'500'000, 8'000'000, 1'000'000'000}, &credit, 1);
  EXPECT_EQ(out, (std::vector<int64_t>{1'000'000, 8'000'000, 1'000'000}));
  // A holder that reports more than passed is cut to what passed.
  credit = 10'000'000;
  out = trim_overcharge({200'000, INT64_MAX}, &credit, 1);
  EXPECT_EQ(out, (std::vector<int64_t>{0, 10'000'000}));
  // Within the credit, everyone keeps all.
  credit = 10'000'000;
  out = trim_overcharge({2'000'000, 5'000'000}, &credit, 0);
  EXPECT_EQ(out, (std::vector<int64_t>{2'000'000, 5'000'000}));
  EXPECT_EQ(credit, 3'000'000);
}

TEST(TrimOvercharge, NoCreditChargesNothing) {
  int64_t credit = 0;
  auto out = trim_overcharge({1'000, 2'000}, &credit);
  EXPECT_EQ(out, (std::vector<int64_t>{0, 0}));
}

}  // namespace
}  // namespace egpu::faa
