// hpc-like: long kernels with CPU phases between them and a sync after every
// step, like a simulation that alternates solver kernels and host work.
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "latency_stats.h"
#include "workload.h"

namespace {

using egpu::workload::Clock;
using egpu::workload::OptionParser;
using egpu::workload::UsageError;
using egpu::workload::WorkloadContext;
using egpu::workload::WorkloadResult;

struct HpcOptions {
  double kernel_ms_min = 20;
  double kernel_ms_max = 50;
  double cpu_ms = 5;
  std::uint64_t max_steps = 0;
};

// "30" or "20-50" (uniform in the range).
void parse_kernel_ms(const std::string& text, HpcOptions& options) {
  const auto dash = text.find('-', 1);
  if (dash == std::string::npos) {
    options.kernel_ms_min = options.kernel_ms_max = egpu::workload::parse_double("kernel-ms", text);
  } else {
    options.kernel_ms_min = egpu::workload::parse_double("kernel-ms", text.substr(0, dash));
    options.kernel_ms_max = egpu::workload::parse_double("kernel-ms", text.substr(dash + 1));
  }
}

WorkloadResult run_hpc(const HpcOptions& options, const WorkloadContext& context) {
  std::mt19937_64 random(context.options.seed);
  std::uniform_real_distribution<double> kernel_ms(options.kernel_ms_min, options.kernel_ms_max);
  std::vector<double> step_ms;
  std::uint64_t steps = 0;
  std::uint64_t device_ns = 0;
  // The CPU phase sleeps: host work of an MPI rank, without taking a core of
  // the shared test machine.
  const auto cpu_phase = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(options.cpu_ms));
  while (!context.clock.should_stop() && (options.max_steps == 0 || steps < options.max_steps)) {
    const auto started = Clock::now();
    const auto ns = static_cast<std::uint64_t>(kernel_ms(random) * 1e6);
    context.spin.launch(ns);
    context.session.synchronize();
    ++steps;
    device_ns += ns;
    step_ms.push_back(egpu::workload::seconds_between(started, Clock::now()) * 1e3);
    context.progress.report(context.clock, "steps=" + std::to_string(steps));
    if (!egpu::workload::sleep_for(cpu_phase)) break;
  }

  WorkloadResult result;
  result.kernels = steps;
  result.device_time_s = static_cast<double>(device_ns) * 1e-9;
  result.work_done = static_cast<double>(steps);
  result.throughput_unit = "steps/s";
  result.fields = {{"steps", steps},
                   {"kernel_ms_min", options.kernel_ms_min},
                   {"kernel_ms_max", options.kernel_ms_max},
                   {"cpu_ms", options.cpu_ms},
                   {"step_ms", to_json(egpu::workload::compute_percentiles(step_ms))}};
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  HpcOptions options;
  egpu::workload::WorkloadSpec spec;
  spec.name = "hpc-like";
  spec.summary = "Steps of one long kernel, a sync and a CPU phase (sleep).";
  spec.add_options = [&options](OptionParser& parser) {
    parser.add_custom("kernel-ms", "MS|MIN-MAX",
                      "kernel duration in ms, fixed or uniform in a range (default 20-50)",
                      [&options](const std::string& text) { parse_kernel_ms(text, options); });
    parser.add_double("cpu-ms", &options.cpu_ms, "CPU phase after each step in ms (default 5)");
    parser.add_u64("steps", &options.max_steps, "stop after N steps, 0 = no limit (default 0)");
  };
  spec.validate = [&options] {
    if (options.kernel_ms_min < 0 || options.kernel_ms_max < options.kernel_ms_min) {
      throw UsageError("--kernel-ms: need 0 <= MIN <= MAX");
    }
    if (options.cpu_ms < 0) throw UsageError("--cpu-ms must be >= 0");
  };
  spec.run = [&options](const WorkloadContext& context) { return run_hpc(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
