// Enforcement precision on the simulated GPU, with the real agent and shim:
// achieved device-time shares (simgpu's ground truth: each instance's part of
// the device time used) against the targets, and the GPU kept busy (handovers
// cost a little idle time, which is nobody's share).
// Bars (issue "Enforcement"): within 2 pp of target over 5 s (3 pp where a
// workload's kernels run 20 ms or longer) and within 3 pp over every 500 ms
// window, at 10 ms slices. The cases and their bars are in scenarios.cpp,
// shared with scripts/bench.
#include <gtest/gtest.h>

#include <cstdio>

#include "enforced_node.h"
#include "scenarios.h"

namespace egpu::integration {
namespace {

// Workloads that always ask keep the GPU busy but for the handovers (a sanity
// bound: on a loaded 2-core VM a descheduled launcher also leaves gaps).
constexpr double kMinUtilisation = 0.85;

void run_case(std::string_view name) {
  const Scenario* c = find_scenario(name);
  ASSERT_NE(c, nullptr) << name;
  // Workloads of 8 s; shares over 5 s after 1.5 s of warm-up.
  const ScenarioRun run = run_scenario(*c, ScenarioTiming{});
  const harness::ShareReport& report = run.report;
  std::printf("%s (GPU %.1f%% busy):\n%s", c->name.c_str(), run.utilisation * 100,
              harness::format_report(report, run.targets).c_str());
  for (const auto& [label, charged] : run.agent_charged) {
    std::printf("  %-20s agent charged %.1f%% of wall (ground truth %.1f%%)\n", label.c_str(),
                charged * 100, run.wall.share(label) * 100);
  }
  EXPECT_GE(report.span_s, 4.5);
  EXPECT_GE(run.utilisation, kMinUtilisation);
  for (const ScenarioMember& m : c->members) {
    const double target = m.units / 100.0;
    EXPECT_NEAR(report.share(m.label) * 100, target * 100, c->whole_tolerance_pp) << m.label;
    EXPECT_LE(report.worst_window_deviation_pp(m.label, target), c->window_tolerance_pp) << m.label;
  }
}

TEST(Precision, Greedy50x50) {
  run_case("g50-50");
}

TEST(Precision, Greedy70x30) {
  run_case("g70-30");
}

TEST(Precision, Mixed20x30x50WithShortKernels) {
  run_case("g20-30-50");
}

TEST(Precision, TenInstancesOfTenPercent) {
  run_case("g10x10");
}

TEST(Precision, MlLikePair70x30) {
  run_case("ml70-30");
}

TEST(Precision, HpcLikeAgainstGreedy50x50) {
  // Kernels of 20 ms: the whole-run bar is 3 pp.
  run_case("hpc50-50");
}

TEST(Precision, MlLikeAgainstHpcLike60x40) {
  run_case("ml-hpc60-40");
}

}  // namespace
}  // namespace egpu::integration
