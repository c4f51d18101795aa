#include "round_stats.h"

#include <algorithm>
#include <cmath>

namespace egpu::bench {

RoundStats summarize(std::vector<double> values) {
  RoundStats stats;
  stats.values = values;
  if (values.empty()) return stats;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  stats.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  stats.min = values.front();
  stats.max = values.back();
  stats.spread_pct = stats.median != 0 ? (stats.max - stats.min) / stats.median * 100.0 : 0.0;
  return stats;
}

double rounded(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

nlohmann::json to_json(const RoundStats& stats, int decimals) {
  nlohmann::json rounds = nlohmann::json::array();
  for (double v : stats.values)
    rounds.push_back(rounded(v, decimals));
  return {{"median", rounded(stats.median, decimals)},
          {"min", rounded(stats.min, decimals)},
          {"max", rounded(stats.max, decimals)},
          {"spread_pct", rounded(stats.spread_pct, 1)},
          {"rounds", rounds}};
}

}  // namespace egpu::bench
