#include "core/slo/latency_model.h"

#include <gtest/gtest.h>

namespace egpu::slo {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(LatencyModel, KnowsNothingBeforeItSeesAWindow) {
  LatencyModel m;
  EXPECT_FALSE(m.predict(2.0).has_value());
  EXPECT_FALSE(m.headroom_for(40 * kMs).has_value());
  m.observe(0.0, 10 * kMs);  // no headroom: ignored
  m.observe(2.0, 0);         // no latency: ignored
  EXPECT_EQ(m.points(), 0u);
}

TEST(LatencyModel, InterpolatesBetweenObservedPointsAndInvertsToTheLeastHeadroom) {
  LatencyModel m;
  m.observe(1.0, 100 * kMs);
  m.observe(2.0, 40 * kMs);
  m.observe(4.0, 20 * kMs);
  EXPECT_DOUBLE_EQ(*m.predict(1.5), 70.0 * kMs);
  EXPECT_DOUBLE_EQ(*m.predict(3.0), 30.0 * kMs);
  // Above the last point latency stays at the service's own time.
  EXPECT_DOUBLE_EQ(*m.predict(10.0), 20.0 * kMs);
  EXPECT_NEAR(*m.headroom_for(55 * kMs), 1.75, 1e-9);
  EXPECT_NEAR(*m.headroom_for(30 * kMs), 3.0, 1e-9);
  // Nothing reaches 10 ms: the caller must probe.
  EXPECT_FALSE(m.headroom_for(10 * kMs).has_value());
}

TEST(LatencyModel, BelowTheLeastObservedHeadroomLatencyGrows) {
  LatencyModel m;
  m.observe(2.0, 40 * kMs);
  EXPECT_DOUBLE_EQ(*m.predict(1.0), 80.0 * kMs);
  EXPECT_NEAR(*m.headroom_for(50 * kMs), 1.6, 1e-9);
}

TEST(LatencyModel, NoisyWindowsNeverPredictMoreShareSlower) {
  LatencyModel m;
  m.observe(1.0, 50 * kMs);
  m.observe(1.5, 60 * kMs);  // noise: slower at more share
  m.observe(3.0, 20 * kMs);
  for (double h = 1.0; h < 4.0; h += 0.05)
    EXPECT_GE(*m.predict(h), *m.predict(h + 0.05) - 1e-6) << h;
  // The two violators pool into one point at 55 ms.
  EXPECT_DOUBLE_EQ(*m.predict(1.25), 55.0 * kMs);
}

TEST(LatencyModel, APointIsTheWorstOfItsRecentWindowsAndFollowsADrift) {
  LatencyModel m;
  for (int i = 0; i < 15; ++i)
    m.observe(2.0, 20 * kMs);
  m.observe(2.0, 45 * kMs);  // one bad window among its recent ones
  EXPECT_DOUBLE_EQ(*m.predict(2.0), 45.0 * kMs);
  for (int i = 0; i < 15; ++i)
    m.observe(2.0, 20 * kMs);
  EXPECT_DOUBLE_EQ(*m.predict(2.0), 45.0 * kMs);
  m.observe(2.0, 20 * kMs);  // sixteen windows later it is forgotten
  EXPECT_DOUBLE_EQ(*m.predict(2.0), 20.0 * kMs);
}

}  // namespace
}  // namespace egpu::slo
