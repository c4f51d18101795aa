// Enforcement precision on the simulated GPU, with the real agent and shim:
// achieved device-time shares (simgpu's ground truth) against the targets.
// Bars (issue "Enforcement"): within 2 pp of target over 5 s (3 pp where a
// workload's kernels run 20 ms or longer) and within 3 pp over every 500 ms
// window, at 10 ms slices.
#include <gtest/gtest.h>

#include <cstdio>

#include "enforced_node.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;

struct Member {
  std::string label;
  uint32_t units;
  std::string program;
  std::vector<std::string> args;
};

struct Case {
  const char* name;
  std::vector<Member> members;
  double whole_tolerance_pp;
  double window_tolerance_pp;
};

void run_case(const Case& c) {
  EnforcedNode node(std::string("prec-") + c.name);
  std::vector<std::unique_ptr<harness::ChildProcess>> procs;
  std::vector<std::string> labels;
  uint64_t job = 100;
  for (const Member& m : c.members) {
    node.create(job, m.units);
    std::vector<std::string> args = m.args;
    for (const char* a : {"--duration-s", "8", "--iters-per-us", "1"})
      args.push_back(a);
    procs.push_back(node.start(job, harness::WorkloadOptions{m.program, args, m.label, {}}));
    labels.push_back(m.label);
    ++job;
  }
  const harness::ShareReport report = measure_shares(node, labels, 1500ms, 5000ms);
  harness::Shares targets;
  for (const Member& m : c.members)
    targets[m.label] = m.units / 100.0;
  std::printf("%s:\n%s", c.name, harness::format_report(report, targets).c_str());
  EXPECT_GE(report.span_s, 4.5);
  for (const Member& m : c.members) {
    const double target = m.units / 100.0;
    EXPECT_NEAR(report.share(m.label) * 100, target * 100, c.whole_tolerance_pp) << m.label;
    EXPECT_LE(report.worst_window_deviation_pp(m.label, target), c.window_tolerance_pp) << m.label;
  }
  for (auto& p : procs)
    finish(*p);
}

std::vector<std::string> greedy(double kernel_us) {
  return {"--kernel-us", std::to_string(kernel_us)};
}

TEST(Precision, Greedy50x50) {
  run_case(
      {"g50-50", {{"a", 50, "greedy", greedy(1000)}, {"b", 50, "greedy", greedy(1000)}}, 2, 3});
}

TEST(Precision, Greedy70x30) {
  run_case(
      {"g70-30", {{"a", 70, "greedy", greedy(1000)}, {"b", 30, "greedy", greedy(1000)}}, 2, 3});
}

TEST(Precision, Mixed20x30x50WithShortKernels) {
  run_case({"g20-30-50",
            {{"a", 20, "greedy", greedy(1000)},
             {"b", 30, "greedy", greedy(100)},
             {"c", 50, "greedy", greedy(1000)}},
            2,
            3});
}

TEST(Precision, TenInstancesOfTenPercent) {
  Case c{"g10x10", {}, 2, 3};
  for (int i = 0; i < 10; ++i)
    c.members.push_back({"w" + std::to_string(i), 10, "greedy", greedy(1000)});
  run_case(c);
}

TEST(Precision, MlLikePair70x30) {
  run_case(
      {"ml70-30", {{"ml-a", 70, "ml-like", {}}, {"ml-b", 30, "ml-like", {"--seed", "2"}}}, 2, 3});
}

TEST(Precision, HpcLikeAgainstGreedy50x50) {
  // Kernels of 20 ms: the whole-run bar is 3 pp.
  run_case(
      {"hpc50-50",
       {{"hpc", 50, "hpc-like", {"--kernel-ms", "20"}}, {"greedy", 50, "greedy", greedy(1000)}},
       3,
       3});
}

TEST(Precision, MlLikeAgainstHpcLike60x40) {
  run_case({"ml-hpc60-40",
            {{"ml", 60, "ml-like", {}}, {"hpc", 40, "hpc-like", {"--kernel-ms", "20-30"}}},
            3,
            3});
}

}  // namespace
}  // namespace egpu::integration
