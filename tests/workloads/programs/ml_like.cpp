// ml-like: training iterations. Each is a burst of many short kernels (a fixed,
// seeded "model" of forward and backward kernels), queued asynchronously with up
// to --queue-ahead iterations in flight (tracked with events); each iteration
// end is waited for, then a small CPU phase runs. With --graph the
// iteration's kernels are captured once into a CUDA graph and each iteration
// replays it with one cuGraphLaunch, as PyTorch's CUDA graphs do.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "cuda_handles.h"
#include "latency_stats.h"
#include "workload.h"

namespace {

using egpu::workload::Clock;
using egpu::workload::Event;
using egpu::workload::OptionParser;
using egpu::workload::UsageError;
using egpu::workload::WorkloadContext;
using egpu::workload::WorkloadResult;

struct MlOptions {
  std::uint64_t kernels_per_iteration = 0;  // 0: seeded random in [30, 60]
  double kernel_us_min = 50;
  double kernel_us_max = 500;
  std::uint64_t long_kernels = 0;  // GEMM-like kernels among the short ones
  double long_kernel_us = 3000;
  std::uint64_t queue_ahead = 2;
  double cpu_us = 300;
  std::uint64_t max_iterations = 0;
  bool graph = false;
};

// The iteration captured from the workload's stream and instantiated.
class IterationGraph {
 public:
  IterationGraph(const WorkloadContext& context, const std::vector<std::uint64_t>& model) {
    using egpu::workload::cuda_check;
    CUstream stream = context.session.stream();
    cuda_check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    for (std::uint64_t ns : model)
      context.spin.launch(ns);
    cuda_check(cuStreamEndCapture(stream, &graph_), "cuStreamEndCapture");
    cuda_check(cuGraphInstantiate(&exec_, graph_, 0), "cuGraphInstantiate");
  }
  ~IterationGraph() {
    if (exec_ != nullptr) cuGraphExecDestroy(exec_);
    if (graph_ != nullptr) cuGraphDestroy(graph_);
  }
  IterationGraph(const IterationGraph&) = delete;
  IterationGraph& operator=(const IterationGraph&) = delete;
  void launch(CUstream stream) const {
    egpu::workload::cuda_check(cuGraphLaunch(exec_, stream), "cuGraphLaunch");
  }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// The kernels of one iteration, in ns; the same every iteration, like a model.
std::vector<std::uint64_t> make_model(const MlOptions& options, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uint64_t count = options.kernels_per_iteration;
  if (count == 0) count = std::uniform_int_distribution<std::uint64_t>(30, 60)(random);
  std::uniform_real_distribution<double> kernel_us(options.kernel_us_min, options.kernel_us_max);
  std::vector<std::uint64_t> model(count);
  for (auto& ns : model)
    ns = static_cast<std::uint64_t>(kernel_us(random) * 1000.0);
  // A real model's few large matrix products among many elementwise kernels:
  // a per-launch average says little about the kernel at the head of a queue.
  for (std::uint64_t i = 0; i < options.long_kernels; ++i) {
    std::uniform_int_distribution<std::size_t> position(0, model.size());
    model.insert(model.begin() + static_cast<std::ptrdiff_t>(position(random)),
                 static_cast<std::uint64_t>(options.long_kernel_us * 1000.0));
  }
  return model;
}

WorkloadResult run_ml(const MlOptions& options, const WorkloadContext& context) {
  const std::vector<std::uint64_t> model = make_model(options, context.options.seed);
  std::uint64_t iteration_ns = 0;
  for (std::uint64_t ns : model)
    iteration_ns += ns;

  std::deque<Event> in_flight;  // one event at the end of each queued iteration
  std::vector<Event> spare;
  std::vector<double> iteration_ms;  // between consecutive iteration ends
  std::uint64_t completed = 0;
  std::uint64_t queued = 0;
  auto last_end = Clock::now();
  const auto cpu_phase = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::micro>(options.cpu_us));
  std::optional<IterationGraph> graph;
  if (options.graph) graph.emplace(context, model);

  auto wait_oldest = [&] {
    in_flight.front().synchronize();
    spare.push_back(std::move(in_flight.front()));
    in_flight.pop_front();
    ++completed;
    const auto now = Clock::now();
    iteration_ms.push_back(egpu::workload::seconds_between(last_end, now) * 1e3);
    last_end = now;
  };

  while (!context.clock.should_stop() &&
         (options.max_iterations == 0 || queued < options.max_iterations)) {
    while (in_flight.size() >= options.queue_ahead)
      wait_oldest();
    // Host work between iterations (data loading, optimizer bookkeeping); it
    // sleeps so it does not take a core of the shared test machine.
    if (!egpu::workload::sleep_for(cpu_phase)) break;
    if (graph) {
      graph->launch(context.session.stream());
    } else {
      for (std::uint64_t ns : model)
        context.spin.launch(ns);
    }
    if (spare.empty()) spare.emplace_back();
    spare.back().record(context.session.stream());
    in_flight.push_back(std::move(spare.back()));
    spare.pop_back();
    ++queued;
    context.progress.report(context.clock, "iterations=" + std::to_string(completed));
  }
  while (!in_flight.empty())
    wait_oldest();

  WorkloadResult result;
  result.kernels = completed * model.size();
  result.device_time_s = static_cast<double>(completed * iteration_ns) * 1e-9;
  result.work_done = static_cast<double>(completed);
  result.throughput_unit = "iterations/s";
  result.fields = {{"iterations", completed},
                   {"kernels_per_iteration", model.size()},
                   {"iteration_device_ms", static_cast<double>(iteration_ns) * 1e-6},
                   {"queue_ahead", options.queue_ahead},
                   {"graph", options.graph},
                   {"cpu_us", options.cpu_us},
                   {"iteration_ms", to_json(egpu::workload::compute_percentiles(iteration_ms))}};
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  MlOptions options;
  egpu::workload::WorkloadSpec spec;
  spec.name = "ml-like";
  spec.summary =
      "Training-like iterations: bursts of short kernels, several iterations queued ahead.";
  spec.add_options = [&options](OptionParser& parser) {
    parser.add_u64("kernels-per-iteration", &options.kernels_per_iteration,
                   "kernels in one iteration, 0 = seeded random in 30..60 (default 0)");
    parser.add_double("kernel-us-min", &options.kernel_us_min,
                      "shortest kernel in us (default 50)");
    parser.add_double("kernel-us-max", &options.kernel_us_max,
                      "longest kernel in us (default 500)");
    parser.add_u64("long-kernels", &options.long_kernels,
                   "long kernels added at seeded places in each iteration (default 0)");
    parser.add_double("long-kernel-us", &options.long_kernel_us,
                      "duration of each long kernel in us (default 3000)");
    parser.add_u64("queue-ahead", &options.queue_ahead,
                   "iterations in flight before waiting for the oldest (default 2)");
    parser.add_double("cpu-us", &options.cpu_us, "CPU phase per iteration in us (default 300)");
    parser.add_u64("iterations", &options.max_iterations,
                   "stop after N iterations, 0 = no limit (default 0)");
    parser.add_flag("graph", &options.graph,
                    "capture an iteration into a CUDA graph once, replay it with cuGraphLaunch");
  };
  spec.validate = [&options] {
    if (options.kernel_us_min < 0 || options.kernel_us_max < options.kernel_us_min) {
      throw UsageError("need 0 <= --kernel-us-min <= --kernel-us-max");
    }
    if (options.long_kernel_us < 0) throw UsageError("--long-kernel-us must be >= 0");
    if (options.queue_ahead == 0) throw UsageError("--queue-ahead must be >= 1");
    if (options.cpu_us < 0) throw UsageError("--cpu-us must be >= 0");
  };
  spec.run = [&options](const WorkloadContext& context) { return run_ml(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
