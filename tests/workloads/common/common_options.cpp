#include "common_options.h"

namespace egpu::workload {

void add_common_options(OptionParser& parser, CommonOptions& options) {
  parser.add_int("device", &options.device, "CUDA device index (default 0)");
  parser.add_double("duration-s", &options.duration_s,
                    "run for this many seconds, 0 = until a count limit or a signal (default 10)");
  parser.add_string("label", &options.label,
                    "name in the summary; also SIMGPU_LABEL for the simulated driver");
  parser.add_double("iters-per-us", &options.iters_per_us,
                    "kernel loop iterations per microsecond on a real GPU; 0 = calibrate at "
                    "start, which is only right when the program runs alone (default 0)");
  parser.add_u64("seed", &options.seed, "seed of the random choices (default 1)");
  parser.add_flag("progress", &options.progress, "print progress to stderr every second");
}

void validate_common_options(const CommonOptions& options) {
  if (options.duration_s < 0) throw UsageError("--duration-s must be >= 0");
  if (options.iters_per_us < 0) throw UsageError("--iters-per-us must be >= 0");
}

}  // namespace egpu::workload
