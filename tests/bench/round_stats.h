// Figures from repeated rounds of one measurement: the median and the spread,
// and A/B comparisons made from rounds interleaved in one run (so drift in the
// machine's load hits both sides alike).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace egpu::bench {

struct RoundStats {
  std::vector<double> values;  // in the order measured
  double median = 0;
  double min = 0;
  double max = 0;
  // (max - min) / median, in percent: how noisy the rounds were.
  double spread_pct = 0;
};

RoundStats summarize(std::vector<double> values);
// Rounded to `decimals` places, so the printed figures carry no false precision.
nlohmann::json to_json(const RoundStats& stats, int decimals);
double rounded(double value, int decimals);

// Whether round `round` of an interleaved A/B series runs A first: alternates,
// so neither side always meets the machine warmer.
inline bool a_first(int round) {
  return round % 2 == 0;
}

}  // namespace egpu::bench
