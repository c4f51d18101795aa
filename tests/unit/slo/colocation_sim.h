// Colocation in simulated time: an inference server driven by a production
// request-rate trace (GenTD26, one container, time-compressed) beside greedy
// training on one simulated GPU under the real FAA SliceScheduler, with the
// real SloController moving share between them every period, as the agent
// will. The harness measures every request's latency and every instance's
// device time itself, so tests judge the controller by what happened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/faa/types.h"
#include "core/slo/latency_objective.h"
#include "core/slo/slo_controller.h"
#include "core/util/result.h"

namespace egpu::slo::sim {

using faa::Nanos;

enum class Control {
  kController,  // inference latency-critical, training lends: the SloController moves share
  kNone,        // the same units, nobody moves them
  kStaticPeak,  // inference sized for its peak, training capped at the rest
};

struct ColocationOptions {
  Control control = Control::kController;
  std::size_t first_minute = 0;     // where in the trace to start
  std::size_t minutes = 60;         // how much of it
  Nanos per_minute = faa::kSecond;  // a trace minute lasts this long
  double peak_requests_per_s = 80;  // at load level 1
  Nanos request_work = 4 * faa::kMillisecond;
  Nanos inference_kernel = 1 * faa::kMillisecond;
  Nanos training_kernel = 2 * faa::kMillisecond;
  uint32_t inference_units = 20;
  uint32_t training_units = 80;
  uint32_t static_peak_units = 45;  // kStaticPeak: the inference's units
  // The objective windows are judged by, and (kController) the inference's.
  LatencyObjective objective{99'000, 40 * faa::kMillisecond};
  bool inference_declares_objective = true;  // false: --egpu-slo off
  SloRole training_role = SloRole::kLend;    // kGuaranteed: burst, lends nothing
  Nanos period = 100 * faa::kMillisecond;    // the controller's
  uint64_t seed = 1;
};

struct ColocationResult {
  std::size_t windows = 0;      // 1 s windows in which requests completed
  std::size_t windows_met = 0;  // ...whose exact percentile met the objective
  double attainment() const {
    return windows == 0 ? 0.0 : static_cast<double>(windows_met) / windows;
  }
  std::size_t requests = 0;
  Nanos duration = 0;
  Nanos inference_device = 0;
  Nanos training_device = 0;
  // Training's device time over what the inference left of the run.
  double training_share_of_leftover() const {
    return static_cast<double>(training_device) / static_cast<double>(duration - inference_device);
  }
  std::vector<uint32_t> inference_units;  // per period, what it was given
  std::vector<Nanos> window_latency;      // per 1 s window, its exact percentile (0: no requests)
};

ColocationResult run_colocation(const std::vector<double>& levels,
                                const ColocationOptions& options);

}  // namespace egpu::slo::sim
