#include "summary.h"

#include <unistd.h>

#include <cstdio>

namespace egpu::workload {

nlohmann::json make_summary(const RunFacts& facts, const CommonOptions& options,
                            const Calibration& calibration, const WorkloadResult& result) {
  nlohmann::json summary = {
      {"workload", facts.workload},
      {"pid", static_cast<long>(getpid())},
      {"device", options.device},
      {"device_name", facts.device_name},
      {"label", options.label},
      {"wall_s", facts.wall_s},
      {"kernels", result.kernels},
      {"device_time_s", result.device_time_s},
      {"throughput", facts.wall_s > 0 ? result.work_done / facts.wall_s : 0.0},
      {"throughput_unit", result.throughput_unit},
      {"stopped_by", facts.stopped_by},
      {"iters_per_us", calibration.iters_per_ns * 1000.0},
      {"calibration", calibration.note},
  };
  for (const auto& [key, value] : result.fields.items())
    summary[key] = value;
  return summary;
}

void print_summary(const nlohmann::json& summary) {
  const std::string text = summary.dump() + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace egpu::workload
