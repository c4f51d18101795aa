// greedy: back-to-back kernels with no syncs (or a sync every N kernels), the
// workload that takes all the device time it is given. With --memset-mb it
// queues memsets instead (cuMemsetD32Async of that much memory), which a
// GPU runs on its own like kernels. With --legacy-launch its kernels go
// through the pre-CUDA-4 API (cuLaunchGridAsync), as a job dodging an
// interposer that wraps only cuLaunchKernel would.
#include <cstdint>
#include <optional>
#include <string>

#include "cuda_check.h"
#include "cuda_handles.h"
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
  std::uint64_t memset_mb = 0;
  bool legacy_launch = false;
};

WorkloadResult run_greedy(const GreedyOptions& options, const WorkloadContext& context) {
  const auto kernel_ns = static_cast<std::uint64_t>(options.kernel_us * 1000.0);
  std::optional<egpu::workload::DeviceBuffer> target;
  if (options.memset_mb != 0) target.emplace(options.memset_mb << 20);
  std::uint64_t launched = 0;
  while (!context.clock.should_stop() &&
         (options.max_kernels == 0 || launched < options.max_kernels)) {
    if (target) {
      egpu::workload::cuda_check(cuMemsetD32Async(target->get(), static_cast<unsigned>(launched),
                                                  target->bytes() / 4, context.session.stream()),
                                 "cuMemsetD32Async");
    } else if (options.legacy_launch) {
      context.spin.launch_legacy(kernel_ns);
    } else {
      context.spin.launch(kernel_ns);
    }
    ++launched;
    if (options.sync_every != 0 && launched % options.sync_every == 0) {
      context.session.synchronize();
    }
    context.progress.report(context.clock, "launched=" + std::to_string(launched));
  }
  context.session.synchronize();

  WorkloadResult result;
  result.kernels = launched;
  // (memsets: their time is the device's to say)
  result.device_time_s =
      target ? 0.0 : static_cast<double>(launched) * static_cast<double>(kernel_ns) * 1e-9;
  result.work_done = static_cast<double>(launched);
  result.throughput_unit = "kernels/s";
  result.fields = {{"kernel_us", options.kernel_us},
                   {"sync_every", options.sync_every},
                   {"memset_mb", options.memset_mb},
                   {"legacy_launch", options.legacy_launch}};
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
    parser.add_u64("memset-mb", &options.memset_mb,
                   "queue memsets of this many MiB (cuMemsetD32Async) instead of kernels, "
                   "0 = kernels (default 0)");
    parser.add_flag("legacy-launch", &options.legacy_launch,
                    "launch through cuLaunchGridAsync (the pre-CUDA-4 API) instead of "
                    "cuLaunchKernel");
  };
  spec.validate = [&options] {
    if (options.kernel_us < 0) throw UsageError("--kernel-us must be >= 0");
  };
  spec.run = [&options](const WorkloadContext& context) { return run_greedy(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
