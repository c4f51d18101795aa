// The contract between a workload program and the shared main: the program
// declares its options and a run function; the main parses, sets up the GPU,
// calibrates, runs, handles signals and prints the JSON summary.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "calibration.h"
#include "common_options.h"
#include "gpu_session.h"
#include "options.h"
#include "run_clock.h"
#include "spin_kernel.h"

namespace egpu::workload {

// What a run function sees; the run clock starts just before it is called.
struct WorkloadContext {
  const CommonOptions& options;
  const GpuSession& session;
  const SpinKernel& spin;
  const RunClock& clock;
  ProgressReporter& progress;
};

// What a run function reports once all its work has completed.
struct WorkloadResult {
  std::uint64_t kernels = 0;    // completed kernels
  double device_time_s = 0;     // sum of their declared durations
  double work_done = 0;         // in throughput_unit x seconds: kernels, iterations, ...
  std::string throughput_unit;  // e.g. "kernels/s"
  nlohmann::json fields = nlohmann::json::object();  // the program's own fields
};

struct WorkloadSpec {
  std::string name;
  std::string summary;
  std::function<void(OptionParser&)> add_options;
  std::function<void()> validate;  // throws UsageError; may be empty
  std::function<WorkloadResult(const WorkloadContext&)> run;
};

// Exit codes: 0 done (also after SIGTERM/SIGINT), 1 driver or runtime error,
// 2 bad command line.
int workload_main(int argc, char** argv, const WorkloadSpec& spec);

}  // namespace egpu::workload
