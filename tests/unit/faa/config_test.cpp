// Config validation and scheduler creation.
#include "core/faa/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/faa/slice_scheduler.h"

namespace egpu::faa {
namespace {

TEST(Config, DefaultsAreValidAndAsDesigned) {
  const Config config;
  EXPECT_TRUE(config.validate().ok()) << config.validate().error();
  EXPECT_EQ(config.slice, 10 * kMillisecond);
  EXPECT_EQ(config.tau, 500 * kMillisecond);
  EXPECT_DOUBLE_EQ(config.preempt_threshold, 0.05);
  EXPECT_EQ(config.min_hold, 1 * kMillisecond);
  EXPECT_EQ(config.min_cap_grant, 1 * kMillisecond);
}

TEST(Config, SliceMustBeOneToFiftyMilliseconds) {
  Config config;
  config.slice = 1 * kMillisecond;
  EXPECT_TRUE(config.validate().ok());
  config.slice = 50 * kMillisecond;
  EXPECT_TRUE(config.validate().ok());
  config.slice = 999 * kMicrosecond;
  const Status low = config.validate();
  EXPECT_FALSE(low.ok());
  EXPECT_NE(low.error().find("slice 0.999 ms"), std::string::npos) << low.error();
  EXPECT_NE(low.error().find("1-50 ms"), std::string::npos) << low.error();
  config.slice = 51 * kMillisecond;
  const Status high = config.validate();
  EXPECT_FALSE(high.ok());
  EXPECT_NE(high.error().find("slice 51 ms"), std::string::npos) << high.error();
}

TEST(Config, TauMustSpanSeveralSlices) {
  Config config;
  config.tau = 49 * kMillisecond;  // under 5 slices of 10 ms
  const Status status = config.validate();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error().find("tau 49 ms"), std::string::npos) << status.error();
  config.tau = 61 * kSecond;
  EXPECT_FALSE(config.validate().ok());
  config.tau = 50 * kMillisecond;
  EXPECT_TRUE(config.validate().ok());
}

TEST(Config, PreemptThresholdIsAFractionOfTheGpu) {
  Config config;
  for (const double bad : {0.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    config.preempt_threshold = bad;
    const Status status = config.validate();
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_NE(status.error().find("preempt_threshold"), std::string::npos) << status.error();
  }
  config.preempt_threshold = 1.0;
  EXPECT_TRUE(config.validate().ok());
}

TEST(Config, MinHoldAndMinCapGrantFitInASlice) {
  Config config;
  config.min_hold = 11 * kMillisecond;
  EXPECT_NE(config.validate().error().find("min_hold"), std::string::npos);
  config.min_hold = -1;
  EXPECT_FALSE(config.validate().ok());
  config.min_hold = 0;
  EXPECT_TRUE(config.validate().ok());
  config.min_cap_grant = 0;
  EXPECT_NE(config.validate().error().find("min_cap_grant"), std::string::npos);
  config.min_cap_grant = 11 * kMillisecond;
  EXPECT_FALSE(config.validate().ok());
}

TEST(Config, CreateRefusesAnInvalidConfigWithItsMessage) {
  Config config;
  config.slice = 0;
  const Result<SliceScheduler> created = SliceScheduler::create(config, 0);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("invalid FAA config: slice"), std::string::npos)
      << created.error();
}

}  // namespace
}  // namespace egpu::faa
