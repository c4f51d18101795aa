#include <gtest/gtest.h>

#include "core/faa/arbiter_policy.h"

namespace egpu::faa {
namespace {

PolicySettings bounds(int64_t shared_ns, int64_t alone_ns) {
  PolicySettings s{};
  s.inflight_limit_ns = shared_ns;
  s.inflight_alone_ns = alone_ns;
  return s;
}

TEST(InflightBound, ALoneBurstJobGetsTheDeepQueue) {
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 20'000'000), 1, true), 20'000'000);
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 20'000'000), 0, true), 20'000'000);
}

TEST(InflightBound, TwoJobsWithProcessesOrACapGetTheSharedBound) {
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 20'000'000), 2, true), 2'000'000);
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 20'000'000), 5, true), 2'000'000);
  // A capped job alone: a deep queue would run on past its cap.
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 20'000'000), 1, false), 2'000'000);
}

TEST(InflightBound, ZeroOrASmallerAloneBoundNeverShrinksTheQueue) {
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 0), 1, true), 2'000'000);
  EXPECT_EQ(inflight_bound(bounds(2'000'000, 1'000'000), 1, true), 2'000'000);
}

}  // namespace
}  // namespace egpu::faa
