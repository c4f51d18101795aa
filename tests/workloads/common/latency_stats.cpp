#include "latency_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace egpu::workload {

namespace {

// Nearest rank: the smallest sample with at least q of all samples at or below it.
double nearest_rank(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

Percentiles compute_percentiles(std::vector<double> samples) {
  Percentiles result;
  if (samples.empty()) return result;
  std::sort(samples.begin(), samples.end());
  result.count = samples.size();
  result.p50 = nearest_rank(samples, 0.50);
  result.p90 = nearest_rank(samples, 0.90);
  result.p99 = nearest_rank(samples, 0.99);
  result.max = samples.back();
  result.mean =
      std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return result;
}

nlohmann::json to_json(const Percentiles& percentiles) {
  return {{"count", percentiles.count}, {"p50", percentiles.p50}, {"p90", percentiles.p90},
          {"p99", percentiles.p99},     {"max", percentiles.max}, {"mean", percentiles.mean}};
}

}  // namespace egpu::workload
