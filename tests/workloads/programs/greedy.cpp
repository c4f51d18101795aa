// greedy: back-to-back kernels with no syncs (or a sync every N kernels), the
// workload that takes all the device time it is given.
#include <cstdint>
#include <string>

#include "workload.h"

namespace {

using egpu::workload::OptionParser;
using egpu::workload::UsageError;
using egpu::workload::WorkloadContext;
using egpu::workload::WorkloadResult;

struct GreedyOptions {
  double kernel_us = 1000;
  std::uint64_t sync_every = 0;
  std::uint64_t max_kernels = 0;
};

WorkloadResult run_greedy(const GreedyOptions& options, const WorkloadContext& context) {
  const auto kernel_ns = static_cast<std::uint64_t>(options.kernel_us * 1000.0);
  std::uint64_t launched = 0;
  while (!context.clock.should_stop() &&
         (options.max_kernels == 0 || launched < options.max_kernels)) {
    context.spin.launch(kernel_ns);
    ++launched;
    if (options.sync_every != 0 && launched % options.sync_every == 0) {
      context.session.synchronize();
    }
    context.progress.report(context.clock, "launched=" + std::to_string(launched));
  }
  context.session.synchronize();

  WorkloadResult result;
  result.kernels = launched;
  result.device_time_s = static_cast<double>(launched) * static_cast<double>(kernel_ns) * 1e-9;
  result.work_done = static_cast<double>(launched);
  result.throughput_unit = "kernels/s";
  result.fields = {{"kernel_us", options.kernel_us}, {"sync_every", options.sync_every}};
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  GreedyOptions options;
  egpu::workload::WorkloadSpec spec;
  spec.name = "greedy";
  spec.summary = "Back-to-back kernels of --kernel-us, queued as deep as the driver allows.";
  spec.add_options = [&options](OptionParser& parser) {
    parser.add_double("kernel-us", &options.kernel_us,
                      "declared duration of each kernel in us, 0 = empty kernels (default 1000)");
    parser.add_u64("sync-every", &options.sync_every,
                   "synchronize after every N kernels, 0 = never (default 0)");
    parser.add_u64("kernels", &options.max_kernels,
                   "stop after N kernels, 0 = no limit (default 0)");
  };
  spec.validate = [&options] {
    if (options.kernel_us < 0) throw UsageError("--kernel-us must be >= 0");
  };
  spec.run = [&options](const WorkloadContext& context) { return run_greedy(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
