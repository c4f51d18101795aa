// Acceptance: a process killed inside the simulated driver, while it holds the
// device, does not stall the processes sharing the device with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "share_math.h"
#include "share_sampler.h"
#include "simgpu_env.h"
#include "test_support.h"
#include "workload_process.h"

namespace egpu::harness {
namespace {

using std::chrono::milliseconds;

// The victim sleeps this long in its first launch, holding the device lock; it
// is killed as soon as the stall begins (simgpu marks it with a file).
constexpr int kStallMs = 60'000;

// The context of `label` in the latest sample, if any.
std::optional<ContextUsage> context_of(const ShareSampler& sampler, const std::string& label) {
  const std::optional<UsageSample> sample = sampler.latest();
  if (!sample) return std::nullopt;
  for (const ContextUsage& context : sample->contexts) {
    if (context.label == label) return context;
  }
  return std::nullopt;
}

TEST(KillInDriver, SurvivorKeepsRunningAndFinishes) {
  SimGpu gpu("kill");
  ShareSampler sampler(simgpu_usage_source(gpu.shm_name()), kSampleInterval);
  auto survivor = start_workload(gpu, greedy_workload("survivor", 0));
  ASSERT_TRUE(sampler.wait_until(labels_busy({"survivor"}), kStartTimeout));

  WorkloadOptions victim_options = greedy_workload("victim", 0);
  victim_options.extra_env["SIMGPU_DEBUG_STALL_IN_DRIVER_MS"] = std::to_string(kStallMs);
  const std::string marker = "/tmp/egpu-kill-test-stall-" + std::to_string(getpid());
  std::remove(marker.c_str());
  victim_options.extra_env["SIMGPU_DEBUG_STALL_MARKER"] = marker;
  auto victim = start_workload(gpu, victim_options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(marker.c_str(), F_OK) != 0 && victim->running() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(access(marker.c_str(), F_OK), 0) << "the victim never stalled in its first launch";
  std::remove(marker.c_str());
  ASSERT_TRUE(victim->running()) << "the victim ended before it could be killed";
  victim->kill(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  const auto victim_status = victim->wait_for(milliseconds(5000));
  ASSERT_TRUE(victim_status.has_value());
  EXPECT_EQ(victim_status->signal, SIGKILL) << victim_status->describe();

  // After the kill the survivor has the device to itself again.
  std::this_thread::sleep_for(milliseconds(2500));
  const ShareReport after_kill =
      compute_shares(samples_between(sampler.samples(), killed_at + milliseconds(300),
                                     killed_at + milliseconds(2300)),
                     0, GroupBy::kLabel, milliseconds(500));
  std::printf("2 s after the kill:\n%s", format_report(after_kill, {{"survivor", 1.0}}).c_str());
  EXPECT_GE(after_kill.span_s, 1.5);
  EXPECT_GE(after_kill.share("survivor"), 0.90);

  // The victim died inside its first launch: its context never ran a kernel.
  const std::optional<ContextUsage> victim_context = context_of(sampler, "victim");
  ASSERT_TRUE(victim_context.has_value()) << "the victim's context is not in the statistics";
  EXPECT_EQ(victim_context->busy_ns, 0u);
  EXPECT_FALSE(victim_context->alive);

  ASSERT_TRUE(survivor->running()) << "the survivor ended: the victim's death took it along";
  const nlohmann::json summary = stop_workload(*survivor);
  EXPECT_EQ(summary.value("workload", ""), "greedy");
  EXPECT_EQ(summary.value("stopped_by", ""), "signal");
  EXPECT_GT(summary.value("kernels", 0), 1000);
  sampler.stop();
}

}  // namespace
}  // namespace egpu::harness
