// egpu-bench: the figures of scripts/bench, measured on the simulated GPU with
// the real agent and shim. Prints ONE JSON object on stdout; progress and
// harness messages go to stderr. Figures only: nothing is asserted here.
//   egpu-bench [--quick] [--only fast-path,throughput,agent-cpu,precision,gang]
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include "agent_cpu_bench.h"
#include "failure_listener.h"
#include "fast_path_bench.h"
#include "gang_scenario.h"
#include "precision_bench.h"
#include "round_stats.h"
#include "throughput_bench.h"

namespace {

using namespace std::chrono_literals;

const std::set<std::string> kParts = {"fast-path", "throughput", "agent-cpu", "precision", "gang"};

struct Options {
  bool quick = false;
  std::set<std::string> parts = kParts;
};

int usage(FILE* out, int code) {
  std::fprintf(out,
               "usage: egpu-bench [--quick] [--only PART[,PART...]]\n"
               "  PART: fast-path, throughput, agent-cpu, precision, gang (default: all)\n"
               "  --quick: fewer rounds and shorter runs (for a smoke test)\n");
  return code;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      o->quick = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      o->parts.clear();
      std::stringstream list(argv[++i]);
      for (std::string part; std::getline(list, part, ',');) {
        if (!kParts.contains(part)) return false;
        o->parts.insert(part);
      }
    } else {
      return false;
    }
  }
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    return usage(stdout, 0);
  }
  if (!parse(argc, argv, &options)) return usage(stderr, 2);
  egpu::bench::FailureListener& failures = egpu::bench::FailureListener::install();

  nlohmann::json out = nlohmann::json::object();
  nlohmann::json details = nlohmann::json::object();
  nlohmann::json part_seconds = nlohmann::json::object();
  auto timed = [&](const std::string& part, auto&& body) {
    if (!options.parts.contains(part)) return;
    std::fprintf(stderr, "egpu-bench: == %s ==\n", part.c_str());
    const auto start = std::chrono::steady_clock::now();
    body();
    part_seconds[part] = egpu::bench::rounded(seconds_since(start), 1);
  };

  timed("fast-path", [&] {
    egpu::bench::FastPathOptions o;
    if (options.quick) o.rounds = 3;
    nlohmann::json r = egpu::bench::run_fast_path_bench(o);
    out["shim_fast_path_ns_per_launch"] = r["ns_per_launch"];
    details["fast_path"] = r;
  });
  timed("throughput", [&] {
    egpu::bench::ThroughputOptions o;
    if (options.quick) {
      o.rounds = 3;
      o.duration_s = 2;
    }
    nlohmann::json r = egpu::bench::run_throughput_bench(o);
    out["full_share_throughput_ratio"] = r["ratio"];
    out["full_share_throughput_ratio_kernel_us"] = r["headline_kernel_us"];
    details["throughput"] = r;
  });
  timed("agent-cpu", [&] {
    egpu::bench::AgentCpuOptions o;
    if (options.quick) o.measure = 5s;
    nlohmann::json r = egpu::bench::run_agent_cpu_bench(o);
    out["agent_cpu_percent_64_instances"] = r["cpu_percent_of_one_core"];
    details["agent_cpu"] = r;
  });
  timed("precision", [&] {
    egpu::integration::ScenarioTiming t;
    if (options.quick) t = {1000ms, 3000ms};
    out["precision"] = egpu::bench::run_precision_bench(t);
  });

  timed("gang", [&] {
    // A ddp-like step's two ranks at 50% of two GPUs beside greedy
    // co-tenants, against the same step alone on the two whole GPUs.
    egpu::integration::GangSetup alone_setup{.gang = true, .rank_units = 100, .cotenants = false};
    egpu::integration::GangSetup gang_setup;
    egpu::integration::GangSetup independent_setup{.gang = false};
    if (options.quick) {
      for (auto* s : {&alone_setup, &gang_setup, &independent_setup})
        s->measure = 3000ms;
    }
    const auto alone = egpu::integration::run_gang_step(alone_setup);
    const auto gang = egpu::integration::run_gang_step(gang_setup);
    const auto independent = egpu::integration::run_gang_step(independent_setup);
    const auto ratio = [&](const egpu::integration::GangRun& r) {
      return egpu::bench::rounded(egpu::integration::gang_iteration_ratio(r, alone, 50), 3);
    };
    out["gang_iteration_ratio"] = ratio(gang);
    out["independent_iteration_ratio"] = ratio(independent);
    out["gang_cotenant_worst_window_pp"] = egpu::bench::rounded(gang.cotenant_worst_window_pp, 2);
    details["gang"] = {
        {"alone_iterations_per_s", egpu::bench::rounded(alone.iterations_per_s, 1)},
        {"gang_iterations_per_s", egpu::bench::rounded(gang.iterations_per_s, 1)},
        {"independent_iterations_per_s", egpu::bench::rounded(independent.iterations_per_s, 1)},
        {"gang_cotenant_share", egpu::bench::rounded(gang.cotenant_share, 3)},
        {"independent_cotenant_share", egpu::bench::rounded(independent.cotenant_share, 3)},
        {"independent_cotenant_worst_window_pp",
         egpu::bench::rounded(independent.cotenant_worst_window_pp, 2)}};
  });

  if (out.contains("shim_fast_path_ns_per_launch") || out.contains("full_share_throughput_ratio")) {
    nlohmann::json acceptance = nlohmann::json::object();
    const nlohmann::json& ns = out.value("shim_fast_path_ns_per_launch", nlohmann::json());
    const nlohmann::json& ratio = out.value("full_share_throughput_ratio", nlohmann::json());
    if (ns.is_number()) acceptance["fast_path_at_most_100_ns"] = ns.get<double>() <= 100.0;
    if (ratio.is_number())
      acceptance["full_share_ratio_at_least_0_99"] = ratio.get<double>() >= 0.99;
    out["acceptance"] = acceptance;
  }
  out["quick"] = options.quick;
  out["details"] = details;
  out["part_seconds"] = part_seconds;
  out["harness_failures"] = failures.failures();
  std::printf("%s\n", out.dump(2).c_str());
  return failures.failures().empty() ? 0 : 1;
}
