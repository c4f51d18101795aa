// Percentiles of latency samples (nearest-rank).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

namespace egpu::workload {

struct Percentiles {
  std::size_t count = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
  double mean = 0;
};

// All zeros for no samples.
Percentiles compute_percentiles(std::vector<double> samples);

// {"count", "p50", "p90", "p99", "max", "mean"}
nlohmann::json to_json(const Percentiles& percentiles);

}  // namespace egpu::workload
