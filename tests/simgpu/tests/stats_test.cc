// simgpu_stats: samples bring the devices to "now" and report contexts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "model/device_lock.h"
#include "model/process_identity.h"
#include "model/segment.h"
#include "model/timeline.h"
#include "simgpu_stats.h"
#include "test_segment_name.h"

namespace egpu::simgpu {
namespace {

using testing::ScopedSegmentName;

TEST(Stats, SampleAdvancesTheDeviceAndReportsContexts) {
  const ScopedSegmentName name("stats");
  SimConfig config;
  config.shm_name = name.name();
  config.device_count = 2;
  config.pci_bus = {0x1b, 0x43};
  std::string error;
  auto seg = Segment::open_or_create(config, &error);
  ASSERT_TRUE(seg) << error;
  {
    DeviceShared& dev = seg->device(1);
    const DeviceLock lock(dev);
    const uint64_t now = monotonic_ns();
    bring_to_now(dev, now, &seg->board());
    const int slot = claim_context(dev.timeline, self_identity(), "stats-test", now);
    ASSERT_GE(slot, 0);
    Op op{};
    op.kind = static_cast<uint32_t>(OpKind::kKernel);
    op.remaining_ns = 60'000'000'000;  // still running at the second sample, however late
    enqueue_op(dev.timeline, static_cast<uint32_t>(slot), op);
  }
  auto reader = StatsReader::open(name.name(), &error);
  ASSERT_TRUE(reader) << error;
  const StatsSample first = reader->sample();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const StatsSample second = reader->sample();
  ASSERT_EQ(second.devices.size(), 2u);
  EXPECT_EQ(second.devices[1].pci_bus_id, "0000:43:00.0");
  ASSERT_EQ(second.contexts.size(), 1u);
  const ContextSample& c = second.contexts[0];
  EXPECT_EQ(c.pid, ::getpid());
  EXPECT_EQ(c.device, 1u);
  EXPECT_EQ(c.label, "stats-test");
  EXPECT_TRUE(c.alive);
  EXPECT_EQ(c.queued_ops, 1u);
  // The kernel ran for exactly the device time that passed between samples.
  const uint64_t ran = second.busy_ns_of_pid(::getpid()) - first.busy_ns_of_pid(::getpid());
  EXPECT_EQ(ran, second.device_clock_ns - first.device_clock_ns);
  EXPECT_EQ(second.devices[1].busy_ns, second.contexts[0].busy_ns);
  EXPECT_EQ(second.devices[0].busy_ns, 0u);
  EXPECT_EQ(second.alive_contexts(1), 1u);
  EXPECT_EQ(second.busy_ns_of_label("stats-test", 0), 0u);

  const auto json = nlohmann::json::parse(format_json(second));
  EXPECT_EQ(json["contexts"][0]["label"], "stats-test");
  EXPECT_EQ(json["devices"].size(), 2u);
  EXPECT_NE(format_text(second).find("stats-test"), std::string::npos);
}

TEST(Stats, OpeningAMissingSegmentFails) {
  const ScopedSegmentName name("nostats");
  std::string error;
  EXPECT_FALSE(StatsReader::open(name.name(), &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(remove_segment(name.name()));
}

}  // namespace
}  // namespace egpu::simgpu
