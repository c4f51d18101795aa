// RequestBudget in simulated time: each user's burst, then its rate; a
// dear request leaves a debt; users apart; ready_at says when a held user is
// served; full budgets leave no entry behind.
#include "core/util/request_budget.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

constexpr int64_t kMs = 1'000'000;

// Serves one request of cost 1 if it may; whether it did.
bool serve(RequestBudget& budget, uid_t uid, int64_t now) {
  if (!budget.may_serve(uid, now)) return false;
  budget.charge(uid, 1, now);
  return true;
}

TEST(RequestBudget, EachUserHasItsBurstThenItsRate) {
  RequestBudget budget(10, 100);  // 10 at once, then one each 10 ms
  const int64_t t0 = 5'000 * kMs;
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(serve(budget, 1000, t0)) << i;
  EXPECT_FALSE(serve(budget, 1000, t0));
  EXPECT_EQ(budget.ready_at(1000, t0), t0 + 10 * kMs);
  // Another user is not held by the first.
  EXPECT_TRUE(serve(budget, 2000, t0));
  EXPECT_EQ(budget.ready_at(2000, t0), t0);
  EXPECT_FALSE(serve(budget, 1000, t0 + 9 * kMs));
  EXPECT_TRUE(serve(budget, 1000, t0 + 10 * kMs));
  // A second of asking as fast as it can: served at the rate, no faster.
  int served = 0;
  for (int64_t t = t0 + 10 * kMs; t <= t0 + 1010 * kMs; t += kMs / 10)
    served += serve(budget, 1000, t) ? 1 : 0;
  EXPECT_GE(served, 99);
  EXPECT_LE(served, 101);
}

TEST(RequestBudget, ADearRequestIsServedThenPaidFor) {
  RequestBudget budget(10, 100);
  const int64_t t0 = 5'000 * kMs;
  ASSERT_TRUE(budget.may_serve(7, t0));
  budget.charge(7, 60, t0);  // a large status: 50 in debt
  EXPECT_FALSE(budget.may_serve(7, t0));
  EXPECT_EQ(budget.ready_at(7, t0), t0 + 510 * kMs);  // back to one token
  EXPECT_FALSE(budget.may_serve(7, t0 + 509 * kMs));
  EXPECT_TRUE(budget.may_serve(7, t0 + 510 * kMs));
  // Nothing costs less than one.
  RequestBudget other(2, 0);
  other.charge(8, 0, t0);
  other.charge(8, 0.5, t0);
  EXPECT_FALSE(other.may_serve(8, t0));
}

TEST(RequestBudget, AQuietUserGetsItsBurstBackAndIsForgotten) {
  RequestBudget budget(4, 2);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(serve(budget, 7, kMs));
  ASSERT_FALSE(serve(budget, 7, kMs));
  EXPECT_EQ(budget.tracked(), 1u);
  // An hour later: its burst again, not an hour's worth.
  const int64_t later = 3'600'000 * kMs;
  int served = 0;
  for (int i = 0; i < 10; ++i)
    served += serve(budget, 7, later) ? 1 : 0;
  EXPECT_EQ(served, 4);
  // A time before the last one (another clock's) refills nothing.
  EXPECT_FALSE(serve(budget, 7, later - 1000 * kMs));
}

TEST(RequestBudget, AZeroRateServesTheBurstOnly) {
  RequestBudget budget(2, 0);
  EXPECT_TRUE(serve(budget, 3, 0));
  EXPECT_TRUE(serve(budget, 3, 0));
  EXPECT_FALSE(serve(budget, 3, 3'600'000 * kMs));
  EXPECT_EQ(budget.ready_at(3, 0), INT64_MAX);
}

TEST(RequestBudget, ManyUsersKeepOnlyTheBudgetsNotFull) {
  RequestBudget budget(1, 1);
  // 5000 users ask once each, a millisecond apart: the ones whose budget
  // refilled (a second on) are dropped when the table fills.
  for (uid_t u = 0; u < 5000; ++u)
    ASSERT_TRUE(serve(budget, u, int64_t{u} * kMs));
  EXPECT_LE(budget.tracked(), 4096u);
  // Whoever is still tracked is held to its budget.
  EXPECT_FALSE(serve(budget, 4999, 4999 * kMs));
}

}  // namespace
}  // namespace egpu
