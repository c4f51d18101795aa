// The enforcement scenarios: which workloads share one simulated GPU at which
// targets, and the bars their achieved shares must meet. One table for the
// precision tests (which assert on it) and scripts/bench (which reports it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "share_math.h"

namespace egpu::integration {

struct ScenarioMember {
  std::string label;
  uint32_t units;  // target share in percent of the GPU
  std::string program;
  std::vector<std::string> args;
};

struct Scenario {
  std::string name;
  std::vector<ScenarioMember> members;
  double whole_tolerance_pp;   // bar on the whole-run share
  double window_tolerance_pp;  // bar on every 500 ms window
};

// The precision cases (precision_test.cpp asserts on each).
const std::vector<Scenario>& precision_scenarios();
// A process that syncs after every kernel against a greedy one, 50/50
// (behaviour_test.cpp asserts on its own copy; the bench reports it here).
const Scenario& sync_against_greedy_scenario();
// A GEMM-heavy training loop against a greedy job, 50/50: the shape that a
// per-launch average misjudges at handovers (behaviour_test.cpp asserts on it).
const Scenario& gemm_training_scenario();
// A training loop replayed as a CUDA graph (captured under the shim) against
// a greedy job, 50/50 (behaviour_test.cpp asserts on it).
const Scenario& graph_training_scenario();
// A job that only sets memory (cuMemsetD32Async, which a GPU may run as a
// kernel) against a greedy job, 30/70 (behaviour_test.cpp asserts on it).
const Scenario& memset_scenario();
// A job that launches only through the pre-CUDA-4 API (cuLaunchGridAsync)
// against a greedy job, 30/70 (behaviour_test.cpp asserts on it).
const Scenario& legacy_launch_scenario();
// The precision cases, the sync case, the GEMM case and the graph case, in
// the bench's order.
std::vector<Scenario> bench_scenarios();
// The scenario called `name` among bench_scenarios(), or nullptr.
const Scenario* find_scenario(std::string_view name);

// The workloads run until the run stops them, after `measure`.
struct ScenarioTiming {
  std::chrono::milliseconds warmup{1500};
  std::chrono::milliseconds measure{5000};
};

struct ScenarioRun {
  // Each instance's share of the device time the instances used together
  // (so the handover gaps, which are nobody's, do not count against anyone).
  harness::ShareReport report;
  // That device time as a fraction of wall time: GPU utilisation.
  double utilisation = 0;
  harness::ShareReport wall;  // the same shares against wall time
  // Device time the agent was told of (before trimming), as a fraction of
  // wall time, by label; empty if the agent's status could not be read.
  std::map<std::string, double> agent_charged;
  harness::Shares targets;                // label -> target fraction
  std::vector<nlohmann::json> summaries;  // each workload's summary, in member order
};

// Runs the scenario on a fresh EnforcedNode (simulated GPU, real agent, real
// shim): creates one instance per member, starts the workloads, measures the
// shares after `warmup` for `measure`, then waits for the workloads to end.
// Harness problems (agent, crashed workloads) are reported as GoogleTest
// failures.
ScenarioRun run_scenario(const Scenario& scenario, const ScenarioTiming& timing = {});

}  // namespace egpu::integration
