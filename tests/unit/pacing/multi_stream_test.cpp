// Several streams of one process: their markers span each other's work (one
// queue) or overlap in time (concurrent engines); either way every nanosecond
// of device time is charged once.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/pacing/device_pacer.h"
#include "sim_device.h"
#include "sim_program.h"

namespace egpu::pacing::testing {
namespace {

struct MultiSetup {
  explicit MultiSetup(SimDevice::Engines engines)
      : device(engines), pacer(device, PacingParams{}), program(device, pacer) {}
  ~MultiSetup() { pacer.destroy_events(); }
  SimDevice device;
  DevicePacer pacer;
  SimProgram program;
};

void run_three_streams(MultiSetup& s) {
  // Round-robin over three streams with different kernel lengths.
  for (int i = 0; i < 3000; ++i) {
    s.program.launch(11, 20 * kUs);
    s.program.launch(12, 50 * kUs);
    s.program.launch(13, 5 * kUs);
  }
  s.program.finish();
}

TEST(SeveralStreams, OneQueueIsChargedOnce) {
  MultiSetup s(SimDevice::Engines::kSerial);
  run_three_streams(s);
  const int64_t busy = s.device.busy_until_now();
  EXPECT_EQ(busy, 3000 * 75 * kUs);
  EXPECT_TRUE(WithinFraction(s.program.charged().total(), busy, 0.03));
}

TEST(SeveralStreams, ConcurrentStreamsChargeTheUnion) {
  MultiSetup s(SimDevice::Engines::kPerStream);
  run_three_streams(s);
  const int64_t busy = s.device.busy_until_now();  // union of the three streams
  EXPECT_LT(busy, 3000 * 75 * kUs);                // they did overlap
  EXPECT_TRUE(WithinFraction(s.program.charged().total(), busy, 0.03));
}

TEST(SeveralStreams, InflightBoundIsPerProcess) {
  MultiSetup s(SimDevice::Engines::kSerial);
  for (int i = 0; i < 3000; ++i) {
    s.program.launch(21, 100 * kUs);
    s.program.launch(22, 100 * kUs);
  }
  // Two streams together stay near one limit, not two.
  EXPECT_LE(s.program.max_true_queued(), 2 * kMs + 2 * kMs / 4 + 300 * kUs);
}

TEST(SeveralStreams, PerThreadStreamIsClosedOnlyByItsOwner) {
  MultiSetup s(SimDevice::Engines::kSerial);
  // Teach the process its kernel length, so a new stream marks every ~50 launches.
  for (int i = 0; i < 500; ++i)
    s.program.launch(30, 10 * kUs);
  s.program.finish();
  constexpr uint64_t kOwner = 99;
  auto owned = s.pacer.stream(31, 31, kOwner);
  ASSERT_GT(owned->marker_interval_now(), 1u);
  int64_t now = s.program.now();
  {
    std::lock_guard lock(owned->lock());
    owned->before_launch(now);
    s.device.launch(31, 10 * kUs);
    owned->after_launch(now);
  }
  const int records = s.device.records();
  // Another thread polls: it may not record on the owner's stream.
  s.pacer.poll_all(now, SimProgram::kThread);
  EXPECT_EQ(s.device.records(), records);
  // The owner may.
  s.pacer.poll_all(now, kOwner);
  EXPECT_EQ(s.device.records(), records + 1);
}

TEST(SeveralStreams, IdleForeignTailIsLetGoAtTheEstimate) {
  MultiSetup s(SimDevice::Engines::kSerial);
  constexpr uint64_t kOwner = 99;
  auto owned = s.pacer.stream(41, 41, kOwner);
  int64_t now = s.program.now();
  for (int i = 0; i < 3; ++i) {
    std::lock_guard lock(owned->lock());
    owned->before_launch(now);
    s.device.launch(41, 100 * kUs);
    owned->after_launch(now);
  }
  EXPECT_GT(s.pacer.queued_ns(), 0);
  // The owner went quiet long ago: a waiter on another thread must not wait on it.
  s.program.advance(100 * kMs);
  s.pacer.poll_all(s.program.now(), SimProgram::kThread);
  s.pacer.poll_all(s.program.now(), SimProgram::kThread);
  EXPECT_EQ(s.pacer.queued_ns(), 0);
}

// A thread-safe device is all the pacer needs from its backend: threads
// launching on their own streams at once leave a consistent state behind.
TEST(SeveralStreams, ThreadsLaunchingAtOnceLeaveConsistentState) {
  SimDevice device(SimDevice::Engines::kPerStream);
  PacingParams params;
  params.inflight_limit_ns = 1'000 * kMs;  // the bound is not under test here
  DevicePacer pacer(device, params);
  device.set_now(1'000 * kMs);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const StreamHandle stream = 100 + t;
      for (int i = 0; i < 2000; ++i) {
        auto s = pacer.stream(stream, stream, 0);
        std::lock_guard lock(s->lock());
        s->before_launch(device.now());
        device.launch(stream, 1 * kUs);
        s->after_launch(device.now());
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(pacer.stream_count(), 4u);
  device.set_now(device.drained_at() + 1);
  pacer.poll_all(device.now(), 1);
  device.set_now(device.drained_at() + 1);
  pacer.poll_all(device.now(), 1);
  EXPECT_EQ(pacer.queued_ns(), 0);
  pacer.destroy_events();
  EXPECT_EQ(device.events_live(), 0);
}

}  // namespace
}  // namespace egpu::pacing::testing
