// The pieces under the scheduler: decay clock, token bucket, pre-grant share
// and the deadline check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/faa/deadline_check.h"
#include "core/faa/decay_clock.h"
#include "core/faa/grant_order.h"
#include "core/util/result.h"
#include "core/util/token_bucket.h"

namespace egpu::faa {
namespace {

constexpr Nanos kTau = 500 * kMillisecond;

TEST(DecayClock, RatiosOfStoredValuesAreRatiosOfTrueValues) {
  DecayClock clock(kTau, 0);
  double a = 0.0;
  double b = 0.0;
  a += 10.0 * clock.scale();
  EXPECT_EQ(clock.advance(250 * kMillisecond), 1.0);
  b += 10.0 * clock.scale();
  // a was added half a tau earlier: it has decayed by e^-0.5 relative to b.
  EXPECT_NEAR(clock.to_true(a), 10.0 * std::exp(-0.5), 1e-9);
  EXPECT_NEAR(clock.to_true(b), 10.0, 1e-9);
  EXPECT_NEAR(clock.to_true_at(b, 750 * kMillisecond), 10.0 * std::exp(-1.0), 1e-9);
}

TEST(DecayClock, RenormalisesWithoutLosingValues) {
  DecayClock clock(kTau, 0);
  double stored = 1.0 * clock.scale();
  // Step through 100 s (200 tau) in 10 ms steps, adding 1 each step, and
  // fold in every renormalisation factor like the scheduler does.
  int renormalised = 0;
  for (Nanos t = 10 * kMillisecond; t <= 100 * kSecond; t += 10 * kMillisecond) {
    const double factor = clock.advance(t);
    if (factor != 1.0) ++renormalised;
    stored = stored * factor + 1.0 * clock.scale();
  }
  EXPECT_GT(renormalised, 0);
  // The geometric series' limit: 1 / (1 - e^(-10/500)).
  EXPECT_NEAR(clock.to_true(stored), 1.0 / (1.0 - std::exp(-0.02)), 1e-6);
  EXPECT_TRUE(std::isfinite(clock.scale()));
}

TEST(DecayClock, VeryLongIdleDecaysToZeroNotNan) {
  DecayClock clock(kTau, 0);
  double stored = 5.0 * clock.scale();
  stored *= clock.advance(10 * 3600 * kSecond);
  EXPECT_EQ(clock.to_true(stored), 0.0);
  EXPECT_EQ(clock.scale(), 1.0);
}

TEST(DecayClock, IgnoresTimeGoingBackwards) {
  DecayClock clock(kTau, kSecond);
  EXPECT_EQ(clock.advance(kSecond / 2), 1.0);
  EXPECT_EQ(clock.now(), kSecond);
  EXPECT_EQ(clock.scale(), 1.0);
}

TEST(TokenBucket, StartsFullRefillsAtRateUpToCapacity) {
  TokenBucket bucket(0.25, 10 * kMillisecond, 0);
  EXPECT_EQ(bucket.tokens(0), 10 * kMillisecond);
  bucket.spend(10 * kMillisecond, 0);
  EXPECT_EQ(bucket.tokens(0), 0);
  EXPECT_EQ(bucket.tokens(20 * kMillisecond), 5 * kMillisecond);
  EXPECT_EQ(bucket.tokens(kSecond), 10 * kMillisecond);
}

TEST(TokenBucket, GoesNegativeAndSaysWhenItIsReady) {
  TokenBucket bucket(0.5, 10 * kMillisecond, 0);
  bucket.spend(30 * kMillisecond, 0);
  EXPECT_EQ(bucket.tokens(0), -20 * kMillisecond);
  EXPECT_EQ(bucket.ready_at(1 * kMillisecond, 0), 42 * kMillisecond);
  EXPECT_EQ(bucket.ready_at(1 * kMillisecond, 50 * kMillisecond), 50 * kMillisecond);
  EXPECT_EQ(bucket.ready_at(11 * kMillisecond, 0), kNever);  // more than it holds
}

// Device time reported far past what the rate repays (a job's page can say
// anything): the wait does not overflow; it is never.
TEST(TokenBucket, AWaitPastTheClocksRangeIsNever) {
  TokenBucket bucket(0.001, 10 * kMillisecond, 0);
  bucket.spend(int64_t{1} << 62, 0);
  EXPECT_EQ(bucket.ready_at(1, 0), kNever);
  EXPECT_EQ(bucket.ready_at(1, kNever - 1), kNever);
  // A debt past int64's range reads as its least value, not as undefined.
  for (int i = 0; i < 4; ++i)
    bucket.spend(int64_t{1} << 62, 0);
  EXPECT_EQ(bucket.tokens(0), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(bucket.holds(1, kNever - 1));
}

TEST(TokenBucket, RateChangeAppliesFromThen) {
  TokenBucket bucket(0.5, 10 * kMillisecond, 0);
  bucket.spend(10 * kMillisecond, 0);
  bucket.set_rate(0.1, 10 * kMillisecond);  // 5 ms refilled at the old rate
  EXPECT_EQ(bucket.tokens(20 * kMillisecond), 6 * kMillisecond);
}

TEST(PreGrantShare, MatchesAPeriodicallyServedInstance) {
  // Serve 10 ms at once every 10 ms / target and follow the decayed share
  // just before each grant: it settles at pre_grant_share().
  for (const double target : {0.01, 0.1, 0.3, 0.7, 1.0}) {
    const double period = 10.0 / target;  // ms
    double used = target * 500.0;         // decayed ms, starting at target
    double before = 0.0;
    for (int grant = 0; grant < 2000; ++grant) {
      before = used / 500.0;
      used = (used + 10.0) * std::exp(-period / 500.0);
    }
    EXPECT_NEAR(pre_grant_share(target, 10 * kMillisecond, kTau), before, 1e-9) << target;
  }
}

TEST(PreGrantShare, LimitsAndBounds) {
  EXPECT_DOUBLE_EQ(pre_grant_share(0.4, 0, kTau), 0.4);
  // Small grants: the linear sawtooth, target - usage / (2 tau).
  EXPECT_NEAR(pre_grant_share(0.5, kMillisecond, kTau), 0.5 - 0.001, 1e-6);
  // Absurd overruns stay positive and finite.
  const double tiny = pre_grant_share(0.01, 3600 * kSecond, kTau);
  EXPECT_GT(tiny, 0.0);
  EXPECT_TRUE(std::isfinite(1.0 / tiny));
}

TEST(DeadlineCheck, CountsDeadlinesPerSlice) {
  constexpr Nanos kSlice = 10 * kMillisecond;
  DeadlineCheck check;
  check.reserve(4);
  // Two instances that must start by now + 1 slice: the slice going elsewhere
  // first leaves only one slot for them.
  check.begin(0, kSlice);
  check.add(15 * kMillisecond, kSecond);
  check.add(19 * kMillisecond, kSecond);
  EXPECT_FALSE(check.feasible());
  check.begin(0, kSlice);
  check.add(15 * kMillisecond, kSecond);
  check.add(20 * kMillisecond, kSecond);
  EXPECT_TRUE(check.feasible());
  // A late deadline counts as due at once.
  check.begin(100 * kMillisecond, kSlice);
  check.add(50 * kMillisecond, kSecond);
  EXPECT_FALSE(check.feasible());
}

TEST(DeadlineCheck, CountsTheNextGrantsOfShortPeriods) {
  constexpr Nanos kSlice = 10 * kMillisecond;
  DeadlineCheck check;
  check.reserve(2);
  // One instance due at 10 ms and again every 10 ms, another due at 20 ms:
  // deadlines 10, 20, 20 but only the slots at 10 and 20 before 30 ms.
  check.begin(0, kSlice);
  check.add(10 * kMillisecond, 10 * kMillisecond);
  check.add(20 * kMillisecond, kSecond);
  EXPECT_FALSE(check.feasible());
  // Every 20 ms instead: 10, 20, 30, 50, ... fits one per slot.
  check.begin(0, kSlice);
  check.add(10 * kMillisecond, 20 * kMillisecond);
  check.add(20 * kMillisecond, kSecond);
  EXPECT_TRUE(check.feasible());
}

TEST(StatusAndResult, CarryValuesAndMessages) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_TRUE(Status::Ok().error().empty());
  const Status error = Error{"broken"};
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.error(), "broken");
  const Result<int> value = 7;
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value.value(), 7);
  EXPECT_TRUE(value.error().empty());
  const Result<int> failed = Error{"no value"};
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error(), "no value");
}

}  // namespace
}  // namespace egpu::faa
