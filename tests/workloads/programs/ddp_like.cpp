// ddp-like: one rank of data-parallel training. Each iteration is a burst of
// compute kernels, then an all-reduce (a collective kernel named
// simgpu_collective_allreduce on communicator --comm with --ranks members),
// then a sync. Each rank is its own process on its own device; on the
// simulated driver a rank's all-reduce holds its device, spinning, until
// every rank has launched its own, as NCCL's kernels do.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "latency_stats.h"
#include "workload.h"

namespace {

using egpu::workload::Clock;
using egpu::workload::OptionParser;
using egpu::workload::UsageError;
using egpu::workload::WorkloadContext;
using egpu::workload::WorkloadResult;

struct DdpOptions {
  std::uint64_t compute_kernels = 8;
  double compute_us = 2000;
  double allreduce_us = 1000;
  std::uint64_t comm = 1;  // EGPU_DDP_COMM, else 1; --comm overrides
  std::uint64_t ranks = 1;
  double cpu_us = 200;
  std::uint64_t max_iterations = 0;
};

std::uint64_t comm_from_environment() {
  const char* text = std::getenv("EGPU_DDP_COMM");
  if (text == nullptr || *text == '\0') return 1;
  char* end = nullptr;
  const unsigned long long comm = std::strtoull(text, &end, 10);
  if (*end != '\0' || text[0] == '-' || comm == 0) {
    throw UsageError(std::string("EGPU_DDP_COMM='") + text + "': expected an integer >= 1");
  }
  return comm;
}

// The all-reduce: (duration ns, communicator, ranks, loop iterations).
class AllReduce {
 public:
  AllReduce(const WorkloadContext& context, const DdpOptions& options)
      : function_(context.session.function("simgpu_collective_allreduce")),
        stream_(context.session.stream()),
        ns_(static_cast<unsigned long long>(options.allreduce_us * 1000.0)),
        comm_(options.comm),
        ranks_(static_cast<unsigned int>(options.ranks)),
        iterations_(context.spin.iterations_for(ns_)) {}

  void launch() const {
    unsigned long long ns = ns_;
    unsigned long long comm = comm_;
    unsigned int ranks = ranks_;
    unsigned long long iterations = iterations_;
    void* params[] = {&ns, &comm, &ranks, &iterations};
    egpu::workload::cuda_check(
        cuLaunchKernel(function_, 1, 1, 1, 32, 1, 1, 0, stream_, params, nullptr),
        "cuLaunchKernel(simgpu_collective_allreduce)");
  }
  std::uint64_t ns() const { return ns_; }

 private:
  CUfunction function_;
  CUstream stream_;
  unsigned long long ns_;
  unsigned long long comm_;
  unsigned int ranks_;
  unsigned long long iterations_;
};

WorkloadResult run_ddp(const DdpOptions& options, const WorkloadContext& context) {
  const AllReduce allreduce(context, options);
  const auto compute_ns = static_cast<std::uint64_t>(options.compute_us * 1000.0);
  const std::uint64_t iteration_ns = options.compute_kernels * compute_ns + allreduce.ns();
  // Host work between iterations (data loading); it sleeps so it does not
  // take a core of the shared test machine.
  const auto cpu_phase = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::micro>(options.cpu_us));
  std::vector<double> iteration_ms;
  std::uint64_t completed = 0;
  // Every rank must run the same number of all-reduces: a rank that stops
  // early (duration, signal) leaves the others waiting in their next one.
  while (!context.clock.should_stop() &&
         (options.max_iterations == 0 || completed < options.max_iterations)) {
    const auto started = Clock::now();
    for (std::uint64_t k = 0; k < options.compute_kernels; ++k)
      context.spin.launch(compute_ns);
    allreduce.launch();
    context.session.synchronize();
    ++completed;
    iteration_ms.push_back(egpu::workload::seconds_between(started, Clock::now()) * 1e3);
    context.progress.report(context.clock, "iterations=" + std::to_string(completed));
    if (!egpu::workload::sleep_for(cpu_phase)) break;
  }

  WorkloadResult result;
  result.kernels = completed * (options.compute_kernels + 1);
  // Declared durations only: time spent waiting for peers is not work.
  result.device_time_s = static_cast<double>(completed * iteration_ns) * 1e-9;
  result.work_done = static_cast<double>(completed);
  result.throughput_unit = "iterations/s";
  result.fields = {{"iterations", completed},
                   {"ranks", options.ranks},
                   {"comm", options.comm},
                   {"compute_kernels", options.compute_kernels},
                   {"compute_us", options.compute_us},
                   {"allreduce_us", options.allreduce_us},
                   {"cpu_us", options.cpu_us},
                   {"iteration_device_ms", static_cast<double>(iteration_ns) * 1e-6},
                   {"iteration_ms", to_json(egpu::workload::compute_percentiles(iteration_ms))}};
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  DdpOptions options;
  egpu::workload::WorkloadSpec spec;
  spec.name = "ddp-like";
  spec.summary =
      "One rank of data-parallel training: compute kernels, an all-reduce (a collective "
      "kernel), a sync. Start --ranks processes, one per device.";
  spec.add_options = [&options](OptionParser& parser) {
    options.comm = comm_from_environment();
    parser.add_u64("compute-kernels", &options.compute_kernels,
                   "compute kernels per iteration (default 8)");
    parser.add_double("compute-us", &options.compute_us,
                      "duration of each compute kernel in us (default 2000)");
    parser.add_double(
        "allreduce-us", &options.allreduce_us,
        "the all-reduce's own duration in us, after all ranks arrived (default 1000)");
    parser.add_u64("comm", &options.comm,
                   "communicator id, the same for every rank of a job (default EGPU_DDP_COMM, "
                   "else 1)");
    parser.add_u64("ranks", &options.ranks,
                   "processes in the communicator; 1 = alone, the all-reduce is a plain "
                   "kernel (default 1)");
    parser.add_double("cpu-us", &options.cpu_us, "CPU phase per iteration in us (default 200)");
    parser.add_u64("iterations", &options.max_iterations,
                   "stop after N iterations, 0 = no limit (default 0); give every rank the "
                   "same N");
  };
  spec.validate = [&options] {
    if (options.compute_us < 0) throw UsageError("--compute-us must be >= 0");
    if (options.allreduce_us < 0) throw UsageError("--allreduce-us must be >= 0");
    if (options.comm == 0) throw UsageError("--comm must be >= 1");
    if (options.ranks == 0 || options.ranks > 1024) throw UsageError("--ranks must be in 1..1024");
    if (options.cpu_us < 0) throw UsageError("--cpu-us must be >= 0");
  };
  spec.run = [&options](const WorkloadContext& context) { return run_ddp(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
