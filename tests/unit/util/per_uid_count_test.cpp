#include "core/util/per_uid_count.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

TEST(PerUidCount, EachUserTakesUpToItsLimitAndGivesBack) {
  PerUidCount count;
  EXPECT_TRUE(count.take(1000, 2));
  EXPECT_TRUE(count.take(1000, 2));
  EXPECT_FALSE(count.take(1000, 2)) << "at its limit";
  EXPECT_TRUE(count.take(1001, 2)) << "another user has its own";
  EXPECT_EQ(count.held(1000), 2u);
  EXPECT_EQ(count.held(1001), 1u);
  count.give_back(1000);
  EXPECT_TRUE(count.take(1000, 2)) << "room again after one went";
  EXPECT_EQ(count.users(), 2u);
}

TEST(PerUidCount, AUserHoldingNoneLeavesNoEntry) {
  PerUidCount count;
  EXPECT_FALSE(count.take(7, 0));
  EXPECT_EQ(count.users(), 0u) << "a refusal counts nothing";
  ASSERT_TRUE(count.take(7, 1));
  count.give_back(7);
  EXPECT_EQ(count.users(), 0u);
  count.give_back(7);  // nothing held: nothing happens
  EXPECT_EQ(count.held(7), 0u);
}

}  // namespace
}  // namespace egpu
