#include "throughput_bench.h"

#include <cstdio>
#include <string>

#include "bench_children.h"
#include "enforced_node.h"
#include "round_stats.h"

namespace egpu::bench {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kJob = 1;

std::vector<std::string> greedy_args(double kernel_us, double duration_s) {
  return {"--kernel-us",    std::to_string(kernel_us),
          "--duration-s",   std::to_string(duration_s),
          "--iters-per-us", "1"};
}

// Kernels per second of one run, or a negative value when it failed.
double throughput_of(test_child::ChildProcess& child, const std::string& what) {
  const nlohmann::json s = wait_summary(child, what, 60s);
  if (!s.contains("throughput") || s.value("stopped_by", "") != "duration") return -1;
  return s["throughput"].get<double>();
}

nlohmann::json one_kernel_length(integration::EnforcedNode& node, double kernel_us,
                                 const ThroughputOptions& options) {
  std::vector<double> with;
  std::vector<double> without;
  std::vector<double> ratios;
  int failed = 0;
  for (int round = 0; round < options.rounds; ++round) {
    double w = -1;
    double wo = -1;
    for (int side = 0; side < 2; ++side) {
      const bool shim_side = (side == 0) == a_first(round);
      std::vector<std::string> args = greedy_args(kernel_us, options.duration_s);
      if (shim_side) {
        auto child = node.start(kJob, harness::WorkloadOptions{"greedy", args, "with-shim", {}});
        w = throughput_of(*child, "greedy (shim, 100 units)");
      } else {
        std::vector<std::string> argv = {harness::workload_path("greedy")};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--label", "no-shim"});
        auto child = start_unmanaged(node.gpu(), argv, "no-shim");
        wo = throughput_of(*child, "greedy (no shim)");
      }
    }
    if (w <= 0 || wo <= 0) {
      ++failed;
      continue;
    }
    with.push_back(w);
    without.push_back(wo);
    ratios.push_back(w / wo);
    std::fprintf(stderr,
                 "egpu-bench: throughput %g us round %d: %.1f kernels/s with shim, %.1f without "
                 "(%.4f)\n",
                 kernel_us, round + 1, w, wo, w / wo);
  }
  const RoundStats with_stats = summarize(with);
  const RoundStats without_stats = summarize(without);
  const double ideal = 1e6 / kernel_us;
  nlohmann::json out = {
      {"kernel_us", kernel_us},
      {"ratio", without_stats.median > 0
                    ? nlohmann::json(rounded(with_stats.median / without_stats.median, 4))
                    : nlohmann::json(nullptr)},
      {"paired_ratio", to_json(summarize(ratios), 4)},
      {"with_shim_kernels_per_s", to_json(with_stats, 1)},
      {"without_shim_kernels_per_s", to_json(without_stats, 1)},
      {"device_busy_with_shim", rounded(with_stats.median / ideal, 4)},
      {"device_busy_without_shim", rounded(without_stats.median / ideal, 4)},
      {"failed_rounds", failed},
  };
  return out;
}

}  // namespace

nlohmann::json run_throughput_bench(const ThroughputOptions& options) {
  integration::EnforcedNode node("bench-tput");
  node.create(kJob, 100);
  nlohmann::json by_kernel = nlohmann::json::array();
  nlohmann::json worst = nullptr;
  for (double kernel_us : options.kernel_us) {
    nlohmann::json one = one_kernel_length(node, kernel_us, options);
    if (one["ratio"].is_number() &&
        (worst.is_null() || one["ratio"].get<double>() < worst["ratio"].get<double>())) {
      worst = one;
    }
    by_kernel.push_back(std::move(one));
  }
  return {
      {"ratio", worst.is_null() ? nlohmann::json(nullptr) : worst["ratio"]},
      {"headline_kernel_us", worst.is_null() ? nlohmann::json(nullptr) : worst["kernel_us"]},
      {"headline", "the lowest ratio over the kernel lengths (the harder case)"},
      {"by_kernel", by_kernel},
      {"duration_s", options.duration_s},
      {"setup",
       "greedy workload on simgpu; with: shim preloaded, burst instance at 100 units (real "
       "agent); without: no shim; throughput = completed kernels / wall time"},
  };
}

}  // namespace egpu::bench
