// LogBudget in simulated time: a burst, then the refill rate, and the
// dropped lines counted into the next one logged.
#include "core/util/log_budget.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(LogBudget, ABurstThenTheRateAndTheDroppedAreCounted) {
  LogBudget budget(5, 1);  // 5 at once, then one a second
  int64_t now = 1000 * kMs;
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(budget.take(now).log) << i;
  // A thousand more in the same second: none logged.
  for (int i = 0; i < 1000; ++i)
    EXPECT_FALSE(budget.take(now + i * kMs / 2).log) << i;
  now += 1000 * kMs;
  const LogBudget::Verdict next = budget.take(now);
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.dropped_before, 1000u);
  EXPECT_FALSE(budget.take(now + 10 * kMs).log);
  // An hour of one request a second logs every one.
  int logged = 0;
  for (int s = 1; s <= 3600; ++s)
    logged += budget.take(now + s * 1000 * kMs).log ? 1 : 0;
  EXPECT_EQ(logged, 3600);
}

TEST(LogBudget, AQuietSourceGetsItsBurstBackButNoMore) {
  LogBudget budget(3, 0.5);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(budget.take(kMs).log);
  EXPECT_FALSE(budget.take(kMs).log);
  // A day later: the burst again, not a day's worth.
  const int64_t later = 86'400'000 * kMs;
  int logged = 0;
  for (int i = 0; i < 10; ++i)
    logged += budget.take(later).log ? 1 : 0;
  EXPECT_EQ(logged, 3);
}

}  // namespace
}  // namespace egpu
