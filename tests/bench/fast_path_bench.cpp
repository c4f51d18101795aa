#include "fast_path_bench.h"

#include <cstdio>
#include <string>
#include <vector>

#include "bench_children.h"
#include "enforced_node.h"
#include "round_stats.h"

namespace egpu::bench {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kJob = 1;

std::vector<std::string> launch_bench_argv(const FastPathOptions& options) {
  return {EGPU_SHIM_LAUNCH_BENCH_PATH,
          "--launches",
          std::to_string(options.launches),
          "--rounds",
          std::to_string(options.loops_per_process),
          "--direct",
          "1"};
}

struct ProcessFigures {
  double ns_per_launch = -1;            // the median of its loops through the linked cuLaunchKernel
  double in_process_difference_ns = 0;  // those minus loops calling the driver directly
  long voluntary_switches = 0;          // over its timed loops: blocking, if any
};

// One process's figures; ns_per_launch < 0 when it failed or did not run the
// way the round needs (shim loaded and managed, or neither).
ProcessFigures one_process(std::unique_ptr<test_child::ChildProcess> child, bool with_shim) {
  const nlohmann::json s =
      wait_summary(*child, with_shim ? "shim_launch_bench (shim)" : "shim_launch_bench", 120s);
  if (!s.contains("ns_per_launch_median")) return {};
  if (s.value("shim", !with_shim) != with_shim || s.value("managed", !with_shim) != with_shim) {
    std::fprintf(stderr, "egpu-bench: shim_launch_bench ran with shim=%s managed=%s, wanted %s\n",
                 s.value("shim", false) ? "true" : "false",
                 s.value("managed", false) ? "true" : "false", with_shim ? "both" : "neither");
    return {};
  }
  return {s["ns_per_launch_median"].get<double>(), s.value("paired_difference_ns_median", 0.0)};
}

}  // namespace

nlohmann::json run_fast_path_bench(const FastPathOptions& options) {
  integration::EnforcedNode node("bench-fast");
  node.create(kJob, 100);
  std::vector<double> with;
  std::vector<double> without;
  std::vector<double> paired;
  std::vector<double> in_process_with;
  std::vector<double> in_process_without;
  nlohmann::json switches = nlohmann::json::array();
  int failed = 0;
  for (int round = 0; round < options.rounds; ++round) {
    ProcessFigures w;
    ProcessFigures wo;
    for (int side = 0; side < 2; ++side) {
      const bool shim_side = (side == 0) == a_first(round);
      if (shim_side) {
        w = one_process(node.start_program(kJob, launch_bench_argv(options)), true);
      } else {
        wo = one_process(start_unmanaged(node.gpu(), launch_bench_argv(options)), false);
      }
    }
    if (w.ns_per_launch < 0 || wo.ns_per_launch < 0) {
      ++failed;
      continue;
    }
    with.push_back(w.ns_per_launch);
    without.push_back(wo.ns_per_launch);
    paired.push_back(w.ns_per_launch - wo.ns_per_launch);
    in_process_with.push_back(w.in_process_difference_ns);
    in_process_without.push_back(wo.in_process_difference_ns);
    switches.push_back(w.voluntary_switches);
    std::fprintf(stderr,
                 "egpu-bench: fast path round %d: %.1f ns with shim, %.1f ns without; in the "
                 "shim's process, wrapper - driver = %.1f ns\n",
                 round + 1, w.ns_per_launch, wo.ns_per_launch, w.in_process_difference_ns);
  }
  const RoundStats with_stats = summarize(with);
  const RoundStats without_stats = summarize(without);
  const RoundStats paired_stats = summarize(paired);
  nlohmann::json out = {
      {"ns_per_launch", rounded(with_stats.median - without_stats.median, 1)},
      {"paired_difference_ns", to_json(paired_stats, 1)},
      {"in_process_wrapper_minus_driver_ns", to_json(summarize(in_process_with), 1)},
      {"in_process_null_check_ns", to_json(summarize(in_process_without), 1)},
      {"with_shim_ns", to_json(with_stats, 1)},
      {"with_shim_voluntary_switches", switches},
      {"without_shim_ns", to_json(without_stats, 1)},
      {"launches_per_loop", options.launches},
      {"loops_per_process", options.loops_per_process},
      {"failed_rounds", failed},
      {"setup",
       "simgpu, real egpu-agentd, one burst instance at 100 units holding the slice alone; "
       "zero-length kernels on a created stream; per process the median of its timed loops. "
       "in_process_*: loops through the linked cuLaunchKernel minus loops calling the "
       "driver's own function, interleaved in one process (the null check: the same without "
       "the shim, ~0)"},
  };
  if (with.empty()) out["ns_per_launch"] = nullptr;
  return out;
}

}  // namespace egpu::bench
