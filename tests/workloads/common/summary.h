// The one JSON object a workload prints on stdout when it ends.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "calibration.h"
#include "common_options.h"
#include "workload.h"

namespace egpu::workload {

struct RunFacts {
  std::string workload;
  std::string device_name;
  double wall_s = 0;
  std::string stopped_by;  // "duration", "signal" or "count"
};

// Common fields ({"workload", "pid", "device", "label", "wall_s", "kernels",
// "device_time_s", "throughput", ...}) followed by the program's own.
nlohmann::json make_summary(const RunFacts& facts, const CommonOptions& options,
                            const Calibration& calibration, const WorkloadResult& result);

// Writes the summary as one line on stdout and flushes it.
void print_summary(const nlohmann::json& summary);

}  // namespace egpu::workload
