#include "agent_cpu_bench.h"

#include <signal.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "enforced_node.h"
#include "proc_cpu.h"
#include "round_stats.h"

namespace egpu::bench {
namespace {

using namespace std::chrono_literals;

std::string label_of(int i) {
  char text[16];
  std::snprintf(text, sizeof text, "i%02d", i);
  return text;
}

}  // namespace

nlohmann::json run_agent_cpu_bench(const AgentCpuOptions& options) {
  const int per_gpu = (options.instances + options.gpus - 1) / options.gpus;
  const auto units = static_cast<uint32_t>(100 / per_gpu);
  integration::NodeOptions node_options;
  node_options.gpus = options.gpus;
  // As deployed: the tests' agents log every decision at debug level, which
  // costs a write per handover.
  node_options.agent_config = "LogLevel=info";
  integration::EnforcedNode node("bench-cpu", node_options);
  std::vector<std::unique_ptr<test_child::ChildProcess>> procs;
  std::vector<std::string> labels;
  for (int i = 0; i < options.instances; ++i) {
    const auto job = static_cast<uint64_t>(1000 + i);
    const auto gpu = static_cast<uint32_t>(i % options.gpus);
    node.create(job, units, "burst", gpu);
    // --duration-s 0: until SIGTERM, so slow starts cannot end the run early.
    procs.push_back(
        node.start(job,
                   harness::WorkloadOptions{"greedy",
                                            {"--kernel-us", std::to_string(options.kernel_us),
                                             "--duration-s", "0", "--iters-per-us", "1"},
                                            label_of(i),
                                            {}},
                   gpu));
    labels.push_back(label_of(i));
  }
  harness::ShareSampler sampler(node.source(), 100ms);
  const bool all_busy = sampler.wait_until(harness::labels_busy(labels), 90s);
  if (!all_busy) std::fprintf(stderr, "egpu-bench: not every instance got device time in 90 s\n");
  std::this_thread::sleep_for(options.warmup);

  const pid_t agent = node.agent().pid();
  const auto cpu_before = process_cpu_seconds(agent);
  const auto host_before = host_cpu_times();
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(options.measure);
  const auto to = std::chrono::steady_clock::now();
  const auto cpu_after = process_cpu_seconds(agent);
  const auto host_after = host_cpu_times();
  sampler.stop();

  const double wall_s = std::chrono::duration<double>(to - from).count();
  nlohmann::json gpu_busy = nlohmann::json::array();
  int with_time = 0;
  const auto window = harness::samples_between(sampler.samples(), from, to);
  for (int gpu = 0; gpu < options.gpus; ++gpu) {
    const harness::ShareReport r =
        harness::compute_shares(window, gpu, harness::GroupBy::kLabel, 0ms);
    double busy = 0;
    for (const auto& [label, share] : r.whole_run) {
      busy += share;
      if (share > 0) ++with_time;
    }
    gpu_busy.push_back(rounded(busy, 4));
  }
  for (auto& p : procs)
    p->kill(SIGTERM);
  for (auto& p : procs) {
    if (!p->wait_for(30s)) p->kill(SIGKILL);
  }

  nlohmann::json out = {
      {"cpu_percent_of_one_core", nullptr},
      {"instances", options.instances},
      {"gpus", options.gpus},
      {"units_per_instance", units},
      {"kernel_us", options.kernel_us},
      {"measure_s", rounded(wall_s, 2)},
      {"instances_with_device_time", with_time},
      {"gpu_busy_fraction", gpu_busy},
      {"setup",
       "simgpu with several devices, real egpu-agentd, one burst instance per greedy process "
       "(shim preloaded), all launching; agent utime+stime from /proc/<pid>/stat"},
  };
  if (cpu_before && cpu_after && wall_s > 0) {
    out["cpu_percent_of_one_core"] = rounded((*cpu_after - *cpu_before) / wall_s * 100.0, 2);
  }
  if (host_before && host_after && host_after->total_s > host_before->total_s) {
    out["host_cpu_busy_percent_all_cores"] =
        rounded((host_after->busy_s - host_before->busy_s) /
                    (host_after->total_s - host_before->total_s) * 100.0,
                1);
  }
  return out;
}

}  // namespace egpu::bench
