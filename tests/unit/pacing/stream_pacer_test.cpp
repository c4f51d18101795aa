// One stream on the simulated device: marker spacing, the in-flight estimate
// and bound, idle gaps, charges against the device's own busy time.
#include <gtest/gtest.h>

#include "core/pacing/device_pacer.h"
#include "sim_device.h"
#include "sim_program.h"

namespace egpu::pacing::testing {
namespace {

constexpr StreamHandle kStream = 7;

PacingParams params_with_limit(int64_t limit) {
  PacingParams p;
  p.inflight_limit_ns = limit;
  return p;
}

struct PacedStream {
  explicit PacedStream(int64_t limit = 2 * kMs,
                       SimDevice::Engines engines = SimDevice::Engines::kSerial)
      : device(engines), pacer(device, params_with_limit(limit)), program(device, pacer) {}
  ~PacedStream() { pacer.destroy_events(); }
  SimDevice device;
  DevicePacer pacer;
  SimProgram program;
};

uint32_t interval_after_greedy_run(int64_t kernel_ns) {
  PacedStream s;
  for (int i = 0; i < 2000; ++i)
    s.program.launch(kStream, kernel_ns);
  return s.pacer.stream(kStream, kStream, 0)->marker_interval_now();
}

TEST(MarkerSpacing, AdaptsToKernelLength) {
  // Limit 2 ms: markers ~500 us of device time apart.
  EXPECT_EQ(interval_after_greedy_run(10 * kUs), 50u);
  EXPECT_EQ(interval_after_greedy_run(50 * kUs), 10u);
  EXPECT_EQ(interval_after_greedy_run(250 * kUs), 2u);
  EXPECT_EQ(interval_after_greedy_run(1 * kMs), 1u);
  EXPECT_EQ(interval_after_greedy_run(2 * kUs), 64u);
}

TEST(MarkerSpacing, ZeroLengthKernelsKeepTheMaximumInterval) {
  PacedStream s;
  const int kLaunches = 64 * 200;
  for (int i = 0; i < kLaunches; ++i)
    s.program.launch(kStream, 0);
  auto stream = s.pacer.stream(kStream, kStream, 0);
  EXPECT_EQ(stream->marker_interval_now(), 64u);
  EXPECT_TRUE(stream->estimate().known());
  // The device never runs: what a segment spans is the launcher's own pace
  // (1 us of CPU per launch here), the short gaps of a process holding the GPU.
  EXPECT_LE(stream->estimate().per_launch_ns(), 1 * kUs);
  // About one marker and one chain restart per 64 launches, not one per launch.
  EXPECT_LT(s.device.records(), kLaunches / 64 * 3);
  EXPECT_EQ(s.program.blocked_ns(), 0);
}

TEST(MarkerSpacing, FollowsAChangeOfKernelLength) {
  PacedStream s;
  for (int i = 0; i < 2000; ++i)
    s.program.launch(kStream, 10 * kUs);
  auto stream = s.pacer.stream(kStream, kStream, 0);
  EXPECT_EQ(stream->marker_interval_now(), 50u);
  for (int i = 0; i < 300; ++i)
    s.program.launch(kStream, 500 * kUs);
  EXPECT_EQ(stream->marker_interval_now(), 1u);
}

TEST(InflightBound, TrueQueuedWorkStaysNearTheLimit) {
  for (int64_t kernel : {10 * kUs, 100 * kUs, 1 * kMs}) {
    PacedStream s(2 * kMs);
    for (int i = 0; i < 3000; ++i)
      s.program.launch(kStream, kernel);
    // Bounded: about the limit plus one marker interval of work, never the
    // seconds a greedy process would queue without a bound.
    EXPECT_LE(s.program.max_true_queued(), 2 * kMs + 2 * kMs / 4 + kernel + 100 * kUs)
        << "kernel " << kernel;
    EXPECT_GT(s.program.blocked_ns(), 0) << "kernel " << kernel;
  }
}

TEST(InflightBound, EstimateTracksTheTrueQueue) {
  PacedStream s(2 * kMs);
  for (int i = 0; i < 3000; ++i)
    s.program.launch(kStream, 100 * kUs);
  const int64_t estimate = s.pacer.queued_ns();
  const int64_t truth = s.device.queued_now();
  // The estimate lags the truth by at most the marker interval not yet seen
  // complete (plus the kernel running now).
  EXPECT_GE(estimate + 100 * kUs, truth);
  EXPECT_LE(estimate, truth + 2 * kMs / 4 + 200 * kUs);
}

TEST(InflightBound, UnknownKernelsRunOnlyTwoAhead) {
  PacedStream s(2 * kMs);
  // 10 ms kernels: the first two are admitted blind, the third waits.
  s.program.launch(kStream, 10 * kMs);
  s.program.launch(kStream, 10 * kMs);
  EXPECT_FALSE(s.pacer.under_limit());
  s.program.launch(kStream, 10 * kMs);
  EXPECT_GE(s.program.blocked_ns(), 9 * kMs);
}

TEST(InflightBound, LargerLimitQueuesMore) {
  PacedStream small(1 * kMs);
  PacedStream large(8 * kMs);
  for (int i = 0; i < 2000; ++i) {
    small.program.launch(kStream, 50 * kUs);
    large.program.launch(kStream, 50 * kUs);
  }
  EXPECT_GT(large.program.max_true_queued(), 4 * small.program.max_true_queued() / 2);
  EXPECT_LE(small.program.max_true_queued(), 1 * kMs + 1 * kMs / 4 + 150 * kUs);
}

TEST(Charges, SteadyStreamsMatchDeviceTime) {
  for (int64_t kernel : {5 * kUs, 50 * kUs, 500 * kUs, 2 * kMs}) {
    PacedStream s;
    for (int i = 0; i < 4000; ++i)
      s.program.launch(kStream, kernel);
    s.program.finish();
    EXPECT_TRUE(WithinFraction(s.program.charged().total(), s.device.busy_until_now(), 0.02))
        << "kernel " << kernel;
    // Steady streams are measured, not estimated.
    EXPECT_LT(s.program.charged().estimated_ns, s.program.charged().total() / 20)
        << "kernel " << kernel;
  }
}

TEST(Charges, CpuBoundLauncherIsMeasuredSparsely) {
  // Kernels of 20 us launched every 10 us of CPU time keep the GPU busy.
  SimDevice device;
  DevicePacer pacer(device, PacingParams{});
  SimProgram program(device, pacer, 10 * kUs);
  for (int i = 0; i < 5000; ++i)
    program.launch(kStream, 20 * kUs);
  program.finish();
  EXPECT_TRUE(WithinFraction(program.charged().total(), device.busy_until_now(), 0.02));
  pacer.destroy_events();
}

TEST(IdleGaps, AreNeverCharged) {
  // Bursts of 100 launches (not a multiple of the marker interval) separated
  // by 50 ms of idle time: only the bursts are device time.
  PacedStream s;
  for (int burst = 0; burst < 40; ++burst) {
    for (int i = 0; i < 100; ++i)
      s.program.launch(kStream, 30 * kUs);
    s.program.idle(50 * kMs);
  }
  s.program.finish();
  const int64_t busy = s.device.busy_until_now();
  EXPECT_EQ(busy, 40 * 100 * 30 * kUs);
  EXPECT_TRUE(WithinFraction(s.program.charged().total(), busy, 0.03));
}

TEST(IdleGaps, AfterAMarkerRestartTheChain) {
  // Exactly one marker interval per burst: the burst's last launch records the
  // marker, the next burst's first launch finds it complete.
  PacedStream s;
  for (int i = 0; i < 2000; ++i)
    s.program.launch(kStream, 10 * kUs);
  const uint32_t k = s.pacer.stream(kStream, kStream, 0)->marker_interval_now();
  ASSERT_EQ(k, 50u);
  s.program.finish();
  const Charge before = s.program.charged();
  const int64_t busy_before = s.device.busy_until_now();
  for (int burst = 0; burst < 50; ++burst) {
    for (uint32_t i = 0; i < k; ++i)
      s.program.launch(kStream, 10 * kUs);
    s.program.idle(20 * kMs);
  }
  s.program.finish();
  const int64_t charged = s.program.charged().total() - before.total();
  const int64_t busy = s.device.busy_until_now() - busy_before;
  EXPECT_TRUE(WithinFraction(charged, busy, 0.02));
  // Measured, not estimated: the markers bracket the bursts exactly.
  EXPECT_LT(s.program.charged().estimated_ns - before.estimated_ns, busy / 20);
}

TEST(IdleGaps, SyncBeforeIdleIsMeasuredExactly) {
  // An inference-like loop: a few kernels, synchronise, idle.
  PacedStream s;
  for (int request = 0; request < 200; ++request) {
    for (int i = 0; i < 3; ++i)
      s.program.launch(kStream, 200 * kUs);
    s.program.synchronize(kStream);
    s.program.idle(3 * kMs);
  }
  s.program.finish();
  const int64_t busy = s.device.busy_until_now();
  EXPECT_EQ(busy, 200 * 3 * 200 * kUs);
  EXPECT_TRUE(WithinFraction(s.program.charged().total(), busy, 0.01));
  EXPECT_EQ(s.program.charged().estimated_ns, 0);
}

TEST(Failures, AFailedEventDropsTheChainWithoutBlocking) {
  PacedStream s;
  for (int i = 0; i < 500; ++i)
    s.program.launch(kStream, 100 * kUs);
  s.device.fail_queries(true);
  s.pacer.poll_all(s.program.now(), SimProgram::kThread);
  // Nothing is known to be queued any more: the bound must not hold launches.
  EXPECT_EQ(s.pacer.queued_ns(), 0);
  EXPECT_TRUE(s.pacer.under_limit());
  for (int i = 0; i < 50; ++i)
    s.program.launch(kStream, 100 * kUs);
  EXPECT_LT(s.program.launches(), 1000);
}

TEST(Retire, ChargesWhatIsLeftAndRecyclesEvents) {
  PacedStream s;
  for (int i = 0; i < 300; ++i)
    s.program.launch(kStream, 100 * kUs);
  const int created = s.device.events_created();
  const Charge left = s.pacer.retire(kStream);
  EXPECT_GT(left.estimated_ns, 0);
  EXPECT_EQ(s.pacer.queued_ns(), 0);
  EXPECT_EQ(s.pacer.stream_count(), 0u);
  // A new stream takes the retired stream's events before creating any.
  for (int i = 0; i < 300; ++i)
    s.program.launch(kStream + 1, 100 * kUs);
  EXPECT_EQ(s.device.events_created(), created);
}

TEST(Retire, EpochChangesSoCachesLookAgain) {
  PacedStream s;
  s.program.launch(kStream, 10 * kUs);
  const uint64_t epoch = s.pacer.epoch();
  (void)s.pacer.retire(kStream);
  EXPECT_NE(s.pacer.epoch(), epoch);
}

TEST(Abandon, ForgetsEventsWithoutTouchingTheDevice) {
  PacedStream s;
  for (int i = 0; i < 300; ++i)
    s.program.launch(kStream, 100 * kUs);
  const int live = s.device.events_live();
  s.pacer.abandon_all();
  EXPECT_EQ(s.device.events_live(), live);
  EXPECT_EQ(s.pacer.queued_ns(), 0);
  // New launches create new events (in the new context).
  for (int i = 0; i < 10; ++i)
    s.program.launch(kStream, 100 * kUs);
  EXPECT_GT(s.device.events_live(), live);
}

// A thread that found its stream's pacer just before another thread
// dropped them all (a context destroyed or reset) or retired it, and
// launches through it after: the pacer is no longer polled, so what it
// counted as queued would never leave the GPU's sum, and every launch would
// wait on the in-flight bound for good. A dropped pacer counts nothing.
TEST(Abandon, APacerDroppedUnderALaunchingThreadCountsNothing) {
  for (const bool retire : {false, true}) {
    PacedStream s;
    for (int i = 0; i < 300; ++i)
      s.program.launch(kStream, 100 * kUs);
    const std::shared_ptr<StreamPacer> held = s.pacer.stream(kStream, kStream, 0);
    if (retire) {
      (void)s.pacer.retire(kStream);
    } else {
      s.pacer.abandon_all();
    }
    ASSERT_EQ(s.pacer.queued_ns(), 0);
    for (int i = 0; i < 100; ++i) {
      std::lock_guard lock(held->lock());
      const Charge before = held->before_launch(s.program.now());
      const Charge after = held->after_launch(s.program.now());
      EXPECT_EQ(before.total() + after.total(), 0);
    }
    EXPECT_EQ(s.pacer.queued_ns(), 0) << (retire ? "retired" : "abandoned");
    EXPECT_TRUE(s.pacer.under_limit());
  }
}

}  // namespace
}  // namespace egpu::pacing::testing
