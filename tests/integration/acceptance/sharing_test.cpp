// Acceptance: the simulated GPU shares device time between processes the way a
// GPU time-slices contexts, measured from its own ground truth.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "share_math.h"
#include "share_sampler.h"
#include "simgpu_env.h"
#include "test_support.h"
#include "workload_process.h"

namespace egpu::harness {
namespace {

using std::chrono::milliseconds;

TEST(Sharing, TwoGreedyWorkloadsGetHalfOfOneDeviceEach) {
  SimGpu gpu("share2");
  ShareSampler sampler(simgpu_usage_source(gpu.shm_name()), kSampleInterval);
  auto a = start_workload(gpu, greedy_workload("greedy-a", 0));
  auto b = start_workload(gpu, greedy_workload("greedy-b", 0));

  ASSERT_TRUE(sampler.wait_until(labels_busy({"greedy-a", "greedy-b"}), kStartTimeout));
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(4000));
  const auto samples = samples_between(sampler.samples(), from, std::chrono::steady_clock::now());
  sampler.stop();
  const ShareReport report = compute_shares(samples, 0, GroupBy::kLabel, milliseconds(500));
  std::printf("two greedy on one device:\n%s",
              format_report(report, {{"greedy-a", 0.5}, {"greedy-b", 0.5}}).c_str());

  EXPECT_GE(report.span_s, 3.0);
  EXPECT_NEAR(report.share("greedy-a"), 0.50, 0.03);
  EXPECT_NEAR(report.share("greedy-b"), 0.50, 0.03);

  const nlohmann::json summary_a = stop_workload(*a);
  const nlohmann::json summary_b = stop_workload(*b);
  EXPECT_GT(summary_a.value("kernels", 0), 0);
  EXPECT_GT(summary_b.value("kernels", 0), 0);
}

TEST(Sharing, OneGreedyWorkloadPerDeviceOwnsItsDevice) {
  SimGpu gpu("dev2", {.devices = 2});
  ShareSampler sampler(simgpu_usage_source(gpu.shm_name()), kSampleInterval);
  auto a = start_workload(gpu, greedy_workload("greedy-dev0", 0));
  auto b = start_workload(gpu, greedy_workload("greedy-dev1", 1));

  ASSERT_TRUE(sampler.wait_until(labels_busy({"greedy-dev0", "greedy-dev1"}), kStartTimeout));
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(3500));
  const auto samples = samples_between(sampler.samples(), from, std::chrono::steady_clock::now());
  sampler.stop();
  const ShareReport device0 = compute_shares(samples, 0, GroupBy::kLabel, milliseconds(500));
  const ShareReport device1 = compute_shares(samples, 1, GroupBy::kLabel, milliseconds(500));
  std::printf("device 0:\n%sdevice 1:\n%s", format_report(device0).c_str(),
              format_report(device1).c_str());

  EXPECT_GE(device0.span_s, 3.0);
  EXPECT_GE(device0.share("greedy-dev0"), 0.95);
  EXPECT_GE(device1.share("greedy-dev1"), 0.95);
  EXPECT_EQ(device0.share("greedy-dev1"), 0.0);
  EXPECT_EQ(device1.share("greedy-dev0"), 0.0);

  const nlohmann::json summary_a = stop_workload(*a);
  const nlohmann::json summary_b = stop_workload(*b);
  EXPECT_EQ(summary_a.value("device", -1), 0);
  EXPECT_EQ(summary_b.value("device", -1), 1);
}

}  // namespace
}  // namespace egpu::harness
