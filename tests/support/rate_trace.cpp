#include "rate_trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace egpu::test {

std::vector<double> load_rate_levels(const std::string& csv_path, int smooth_minutes) {
  std::ifstream in(csv_path);
  if (!in) throw std::runtime_error("cannot read " + csv_path);
  std::string line;
  std::getline(in, line);  // header
  std::map<long, double> per_minute;
  double first = -1;
  for (int row = 2; std::getline(in, line); ++row) {
    std::istringstream fields(line);
    double t = 0, qps = 0;
    char comma = 0;
    if (!(fields >> t >> comma >> qps) || comma != ',' || qps < 0) {
      throw std::runtime_error(csv_path + ":" + std::to_string(row) + ": not 'timestamp,value'");
    }
    if (first < 0) first = t;
    if (t < first)
      throw std::runtime_error(csv_path + ":" + std::to_string(row) + ": time goes back");
    per_minute[std::lround((t - first) / 60.0)] += qps;
  }
  if (per_minute.empty()) throw std::runtime_error(csv_path + ": no rows");
  const long minutes = per_minute.rbegin()->first + 1;
  std::vector<double> levels(static_cast<std::size_t>(minutes), 0.0);
  const long half = smooth_minutes / 2;
  for (long m = 0; m < minutes; ++m) {
    for (long k = std::max(0L, m - half); k <= std::min(minutes - 1, m + half); ++k) {
      if (auto it = per_minute.find(k); it != per_minute.end())
        levels[static_cast<std::size_t>(m)] += it->second;
    }
  }
  const double peak = *std::max_element(levels.begin(), levels.end());
  if (peak <= 0) throw std::runtime_error(csv_path + ": no requests at all");
  for (double& level : levels)
    level /= peak;
  return levels;
}

}  // namespace egpu::test
