// Measures how many spin-kernel loop iterations make one nanosecond of device
// time. It times launches with events, so it is only right when nothing else
// uses the GPU: run a workload alone once and pass the figure it prints
// (iters_per_us in the summary) as --iters-per-us to the runs that share.
#pragma once

#include <string>

#include "gpu_session.h"

namespace egpu::workload {

struct Calibration {
  double iters_per_ns = 1.0;
  bool measured = false;    // false: given on the command line, or device time ignores work
  bool work_scales = true;  // false on the simulated driver, where `ns` alone sets duration
  std::string note;
};

// Given iters_per_us > 0, uses it; otherwise measures.
Calibration calibrate_spin(const GpuSession& session, double iters_per_us);

}  // namespace egpu::workload
