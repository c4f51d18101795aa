// Each workload program runs briefly on the simulated GPU and prints a valid,
// plausible JSON summary; bad input and signals behave as documented.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "share_math.h"
#include "share_sampler.h"
#include "simgpu_env.h"
#include "test_support.h"
#include "workload_process.h"

namespace egpu::harness {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

json run_alone(const SimGpu& gpu, const std::string& program, std::vector<std::string> args,
               const std::string& label) {
  auto child =
      start_workload(gpu, {program, std::move(args), label, {}, test_child::OutputMode::kInherit});
  return finish_workload(*child);
}

std::vector<std::string> with(std::vector<std::string> base, std::vector<std::string> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The fields every summary has, with sane values.
void expect_common_fields(const json& summary, const std::string& workload) {
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary.value("workload", ""), workload);
  EXPECT_GT(summary.value("pid", 0), 0);
  EXPECT_EQ(summary.value("device", -1), 0);
  EXPECT_GT(summary.value("wall_s", 0.0), 0.0);
  EXPECT_TRUE(summary.contains("kernels"));
  EXPECT_TRUE(summary.contains("device_time_s"));
  EXPECT_TRUE(summary.contains("throughput"));
  // Alone on the device, declared device time cannot exceed the wall time.
  EXPECT_LE(summary.value("device_time_s", 0.0), summary.value("wall_s", 0.0) * 1.02);
}

TEST(Workloads, GreedyKeepsTheDeviceBusy) {
  SimGpu gpu("wl-greedy");
  const json summary =
      run_alone(gpu, "greedy", with(brief_run_args(1.5), {"--kernel-us", "1000"}), "greedy");
  expect_common_fields(summary, "greedy");
  const double kernels = summary.value("kernels", 0.0);
  EXPECT_NEAR(summary.value("device_time_s", 0.0), kernels * 1e-3, 1e-6);
  // Alone and never syncing, it keeps the device busy nearly all the time.
  EXPECT_GE(summary.value("device_time_s", 0.0), 0.85 * summary.value("wall_s", 0.0));
  EXPECT_NEAR(summary.value("throughput", 0.0), kernels / summary.value("wall_s", 1.0), 1e-6);
  EXPECT_EQ(summary.value("stopped_by", ""), "duration");
  EXPECT_EQ(summary.value("label", ""), "greedy");
}

TEST(Workloads, GreedyRunsZeroLengthKernelsToACount) {
  SimGpu gpu("wl-zero");
  const json summary = run_alone(
      gpu, "greedy",
      {"--duration-s", "0", "--iters-per-us", "1", "--kernel-us", "0", "--kernels", "2000"},
      "zero");
  expect_common_fields(summary, "greedy");
  EXPECT_EQ(summary.value("kernels", 0), 2000);
  EXPECT_EQ(summary.value("device_time_s", -1.0), 0.0);
  EXPECT_EQ(summary.value("stopped_by", ""), "count");
}

TEST(Workloads, GreedySyncingEveryKernel) {
  SimGpu gpu("wl-sync");
  const json summary = run_alone(
      gpu, "greedy", with(brief_run_args(1), {"--kernel-us", "500", "--sync-every", "1"}), "sync");
  expect_common_fields(summary, "greedy");
  EXPECT_EQ(summary.value("sync_every", 0), 1);
  EXPECT_GT(summary.value("kernels", 0), 100);
}

TEST(Workloads, MlLikeRunsIterationsOfItsModel) {
  SimGpu gpu("wl-ml");
  const json summary = run_alone(gpu, "ml-like", brief_run_args(1.5), "ml");
  expect_common_fields(summary, "ml-like");
  const double iterations = summary.value("iterations", 0.0);
  const double per_iteration = summary.value("kernels_per_iteration", 0.0);
  EXPECT_GT(iterations, 10);
  EXPECT_GE(per_iteration, 30);
  EXPECT_LE(per_iteration, 60);
  EXPECT_DOUBLE_EQ(summary.value("kernels", 0.0), iterations * per_iteration);
  const double iteration_device_ms = summary.value("iteration_device_ms", 0.0);
  EXPECT_GE(iteration_device_ms, per_iteration * 0.050);
  EXPECT_LE(iteration_device_ms, per_iteration * 0.500);
  EXPECT_NEAR(summary.value("device_time_s", 0.0), iterations * iteration_device_ms * 1e-3, 1e-6);
  // Queued ahead, iterations follow each other at about their device time.
  EXPECT_GE(summary["iteration_ms"].value("p50", 0.0), iteration_device_ms * 0.95);
  EXPECT_GE(summary.value("device_time_s", 0.0), 0.7 * summary.value("wall_s", 0.0));
}

TEST(Workloads, MlLikeAddsLongKernelsToItsModel) {
  SimGpu gpu("wl-mllong");
  const json summary =
      run_alone(gpu, "ml-like",
                with(brief_run_args(1),
                     {"--kernels-per-iteration", "20", "--kernel-us-min", "10", "--kernel-us-max",
                      "40", "--long-kernels", "3", "--long-kernel-us", "2000"}),
                "ml-long");
  expect_common_fields(summary, "ml-like");
  EXPECT_EQ(summary.value("kernels_per_iteration", 0), 23);
  // Three 2 ms kernels and twenty of 10-40 us.
  EXPECT_GE(summary.value("iteration_device_ms", 0.0), 6.0 + 20 * 0.010);
  EXPECT_LE(summary.value("iteration_device_ms", 0.0), 6.0 + 20 * 0.040);
}

TEST(Workloads, InferenceLikeLatencyCoversItsKernels) {
  SimGpu gpu("wl-inf");
  const json summary = run_alone(gpu, "inference-like",
                                 with(brief_run_args(2), {"--rate", "100", "--kernels-per-request",
                                                          "4", "--kernel-us", "500"}),
                                 "inference");
  expect_common_fields(summary, "inference-like");
  const double requests = summary.value("requests", 0.0);
  EXPECT_GT(requests, 100);  // ~200 expected at 100/s for 2 s
  EXPECT_LT(requests, 320);
  EXPECT_DOUBLE_EQ(summary.value("kernels", 0.0), requests * 4);
  const json& latency = summary["latency_ms"];
  EXPECT_EQ(latency.value("count", 0.0), requests);
  // A request is 2 ms of device work; latency can only be longer.
  EXPECT_GE(latency.value("p50", 0.0), 2.0);
  EXPECT_LE(latency.value("p50", 0.0), latency.value("p90", 0.0));
  EXPECT_LE(latency.value("p90", 0.0), latency.value("p99", 0.0));
  EXPECT_LE(latency.value("p99", 0.0), latency.value("max", 0.0));
  // Alone on the device a typical request waits little beyond its own work.
  EXPECT_LT(latency.value("p50", 0.0), 5 * summary.value("request_device_ms", 0.0));
}

TEST(Workloads, InferenceLikeClosedLoopServesACount) {
  SimGpu gpu("wl-inf-closed");
  const json summary = run_alone(
      gpu, "inference-like",
      {"--duration-s", "0", "--iters-per-us", "1", "--rate", "0", "--requests", "50", "--samples"},
      "closed");
  expect_common_fields(summary, "inference-like");
  EXPECT_EQ(summary.value("requests", 0), 50);
  EXPECT_EQ(summary.value("stopped_by", ""), "count");
  EXPECT_GE(summary["latency_ms"].value("p50", 0.0), 2.0);  // 4 x 500 us by default
  // --samples: one latency per request, the percentiles' own input.
  ASSERT_TRUE(summary.contains("latency_samples_ms"));
  const auto samples = summary["latency_samples_ms"].get<std::vector<double>>();
  ASSERT_EQ(samples.size(), 50u);
  EXPECT_DOUBLE_EQ(*std::max_element(samples.begin(), samples.end()),
                   summary["latency_ms"].value("max", 0.0));
  EXPECT_GE(*std::min_element(samples.begin(), samples.end()), 2.0);
  // Closed loop: each request arrives when the one before it has completed.
  const auto arrivals = summary["arrival_samples_s"].get<std::vector<double>>();
  ASSERT_EQ(arrivals.size(), 50u);
  for (size_t i = 1; i < arrivals.size(); ++i) {
    EXPECT_GE(arrivals[i] - arrivals[i - 1], samples[i - 1] * 1e-3 - 1e-6) << "request " << i;
  }
}

TEST(Workloads, HpcLikeDeviceTimeMatchesTheDevicesGroundTruth) {
  SimGpu gpu("wl-hpc");
  ShareSampler sampler(simgpu_usage_source(gpu.shm_name()), milliseconds(10));
  const json summary = run_alone(
      gpu, "hpc-like", with(brief_run_args(1.5), {"--kernel-ms", "20", "--cpu-ms", "5"}), "hpc");
  sampler.stop();
  expect_common_fields(summary, "hpc-like");
  const double steps = summary.value("steps", 0.0);
  EXPECT_GT(steps, 30);  // ~60 steps of 25 ms in 1.5 s
  EXPECT_DOUBLE_EQ(summary.value("kernels", 0.0), steps);
  EXPECT_NEAR(summary.value("device_time_s", 0.0), steps * 0.020, 1e-6);
  // Each step is a 20 ms kernel plus a sync.
  EXPECT_GE(summary["step_ms"].value("p50", 0.0), 20.0);

  // The simulated device's own count agrees (the last sample may miss one kernel).
  const auto samples = sampler.samples();
  ASSERT_FALSE(samples.empty());
  std::uint64_t busy_ns = 0;
  for (const UsageSample& sample : samples) {
    for (const ContextUsage& context : sample.contexts) {
      if (context.label == "hpc") busy_ns = std::max(busy_ns, context.busy_ns);
    }
  }
  const double device_time = summary.value("device_time_s", 0.0);
  EXPECT_LE(static_cast<double>(busy_ns) * 1e-9, device_time + 0.001);
  EXPECT_GE(static_cast<double>(busy_ns) * 1e-9, device_time - 0.021);
}

TEST(Workloads, HpcLikeDrawsKernelsFromARange) {
  SimGpu gpu("wl-hpc-range");
  const json summary = run_alone(
      gpu, "hpc-like", with(brief_run_args(1), {"--kernel-ms", "20-50", "--cpu-ms", "1"}), "range");
  expect_common_fields(summary, "hpc-like");
  const double steps = summary.value("steps", 0.0);
  EXPECT_GT(steps, 5);
  EXPECT_GE(summary.value("device_time_s", 0.0), steps * 0.020);
  EXPECT_LE(summary.value("device_time_s", 0.0), steps * 0.050);
}

TEST(Workloads, SigtermStopsLaunchingAndPrintsTheSummary) {
  SimGpu gpu("wl-term");
  for (const std::string program : {"greedy", "ml-like", "inference-like", "hpc-like"}) {
    auto child = start_workload(gpu, {program,
                                      {"--duration-s", "0", "--iters-per-us", "1"},
                                      program,
                                      {},
                                      test_child::OutputMode::kInherit});
    // Once its kernels run (with --iters-per-us given there is no
    // calibration first: they are the run's), its handlers are in place.
    ShareSampler sampler(simgpu_usage_source(gpu.shm_name()), milliseconds(10));
    ASSERT_TRUE(sampler.wait_until(labels_busy({program}), std::chrono::seconds(60))) << program;
    sampler.stop();
    ASSERT_TRUE(child->running()) << program;
    child->kill(SIGTERM);
    const json summary = finish_workload(*child);
    EXPECT_EQ(summary.value("workload", ""), program);
    EXPECT_EQ(summary.value("stopped_by", ""), "signal") << program;
    EXPECT_GT(summary.value("kernels", 0), 0) << program;
  }
}

TEST(Workloads, BadInputExitsWithCodeTwoAndAMessage) {
  SimGpu gpu("wl-bad");
  const std::vector<std::vector<std::string>> cases = {
      {"greedy", "--no-such-option"},        {"greedy", "--kernel-us", "fast"},
      {"greedy", "--duration-s", "-1"},      {"ml-like", "--queue-ahead", "0"},
      {"inference-like", "--rate", "-5"},    {"hpc-like", "--kernel-ms", "50-20"},
      {"hpc-like", "--device", "7"},         {"ml-like", "stray-argument"},
      {"ml-like", "--long-kernel-us", "-1"},
  };
  for (const auto& arguments : cases) {
    test_child::ChildOptions options;
    options.argv = {workload_path(arguments[0])};
    options.argv.insert(options.argv.end(), arguments.begin() + 1, arguments.end());
    options.env = gpu.environment();
    options.stderr_mode = test_child::OutputMode::kCapture;
    test_child::ChildProcess child(options);
    const test_child::ExitStatus status = child.wait();
    const std::string shown = arguments[0] + " " + arguments[1];
    EXPECT_TRUE(status.exited) << shown;
    EXPECT_EQ(status.code, 2) << shown << ": " << child.stderr_text();
    EXPECT_NE(child.stderr_text().find(arguments[0] + ": "), std::string::npos) << shown;
    EXPECT_TRUE(child.stdout_text().empty()) << shown;
  }
}

}  // namespace
}  // namespace egpu::harness
