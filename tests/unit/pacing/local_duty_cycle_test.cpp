#include "core/pacing/local_duty_cycle.h"

#include <gtest/gtest.h>

namespace egpu::pacing {
namespace {

constexpr int64_t kMs = 1'000'000;

// A greedy instance running 1 ms kernels whenever the duty cycle lets it: over
// a long run its device time is its share of the wall time.
double run_share(double share) {
  LocalDutyCycle duty(10 * kMs);
  int64_t now = 5 * kMs;
  uint64_t device_ns = 0;
  duty.start(share, device_ns, now);
  const int64_t end = now + 2'000 * kMs;
  while (now < end) {
    const int64_t wait = duty.wait_ns(device_ns, now);
    if (wait > 0) {
      now += wait;
      continue;
    }
    device_ns += 1 * kMs;
    now += 1 * kMs;
  }
  return static_cast<double>(device_ns) / static_cast<double>(2'000 * kMs);
}

TEST(LocalDutyCycle, HoldsTheShare) {
  EXPECT_NEAR(run_share(0.3), 0.3, 0.02);
  EXPECT_NEAR(run_share(0.7), 0.7, 0.02);
  EXPECT_NEAR(run_share(1.0), 1.0, 0.01);
}

TEST(LocalDutyCycle, NotStartedAdmitsEverything) {
  LocalDutyCycle duty;
  EXPECT_FALSE(duty.started());
  EXPECT_EQ(duty.wait_ns(1'000'000'000, 0), 0);
}

TEST(LocalDutyCycle, WaitsOffAnOverrun) {
  LocalDutyCycle duty(10 * kMs);
  duty.start(0.5, 0, 0);
  // A 50 ms kernel (overrun) leaves a 40 ms debt: 80 ms at half rate.
  const int64_t wait = duty.wait_ns(50 * kMs, 0);
  EXPECT_GE(wait, 80 * kMs);
  EXPECT_LE(wait, 80 * kMs + 10);
}

}  // namespace
}  // namespace egpu::pacing
