#include <cstdio>
#include <cstdlib>
#include <exception>

#include "stop_signal.h"
#include "summary.h"
#include "workload.h"

namespace egpu::workload {

namespace {

int run(int argc, char** argv, const WorkloadSpec& spec) {
  CommonOptions options;
  OptionParser parser(spec.name, spec.summary);
  add_common_options(parser, options);
  if (spec.add_options) spec.add_options(parser);
  if (!parser.parse(argc, argv)) return 0;  // --help
  validate_common_options(options);
  if (spec.validate) spec.validate();

  install_stop_handlers();
  // The simulated driver labels this process's contexts in its statistics.
  if (!options.label.empty()) setenv("SIMGPU_LABEL", options.label.c_str(), 0);

  const GpuSession session(options.device);
  const Calibration calibration = calibrate_spin(session, options.iters_per_us);
  const SpinKernel spin(session.spin_function(), session.stream(), calibration.iters_per_ns);
  ProgressReporter progress(options.progress, spec.name);

  const RunClock clock(options.duration_s);
  const WorkloadResult result = spec.run({options, session, spin, clock, progress});
  session.synchronize();  // the summary counts completed work only

  RunFacts facts;
  facts.workload = spec.name;
  facts.device_name = session.device_name();
  facts.wall_s = clock.elapsed_s();
  facts.stopped_by = stop_requested() ? "signal" : clock.expired() ? "duration" : "count";
  print_summary(make_summary(facts, options, calibration, result));
  return 0;
}

}  // namespace

int workload_main(int argc, char** argv, const WorkloadSpec& spec) {
  try {
    return run(argc, argv, spec);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "%s: %s\n", spec.name.c_str(), error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", spec.name.c_str(), error.what());
    return 1;
  }
}

}  // namespace egpu::workload
