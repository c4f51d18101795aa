// Throughput at a 100% share: a greedy workload with the shim preloaded and
// its instance at 100 units, against the same workload without the shim, on
// the simulated GPU. Realistic kernel lengths: the in-flight bound and the
// gate's wake-ups are what could cost throughput, and short kernels stress them.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace egpu::bench {

struct ThroughputOptions {
  std::vector<double> kernel_us = {100, 1000};
  int rounds = 5;         // interleaved with/without pairs per kernel length
  double duration_s = 3;  // each workload run
};

// {"ratio": the lowest of the per-kernel ratios, "headline_kernel_us": ...,
//  "by_kernel": [{kernel_us, ratio, with_shim, without_shim}, ...]}
nlohmann::json run_throughput_bench(const ThroughputOptions& options);

}  // namespace egpu::bench
