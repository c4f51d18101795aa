// FGD's fragmentation measure, and the placements FGD and best-fit make.
#include "tools/clustersim/fragmentation.h"

#include <gtest/gtest.h>

#include "test_cluster.h"
#include "tools/clustersim/placement_policy.h"

namespace egpu::clustersim {
namespace {

using test::demand;
using test::node_spec;
using test::pointers;
using Gpus = std::vector<uint32_t>;

// Half the tasks ask 810 thousandths, half 160, each with 4 CPUs.
std::vector<Demand> two_kinds() {
  std::vector<Demand> workload;
  for (int i = 0; i < 10; ++i) {
    workload.push_back(demand(4, 1, 810));
    workload.push_back(demand(4, 1, 160));
  }
  return workload;
}

TEST(FragmentationMeasure, CountsFreeGpuThatTypicalTasksCannotUse) {
  const auto workload = two_kinds();
  const FragmentationMeasure measure(workload, 100);
  EXPECT_EQ(measure.kinds(), 2U);
  const std::vector<uint32_t> empty{1000, 1000};
  EXPECT_DOUBLE_EQ(measure.node_fragment(32000, empty), 0);
  // 190 free: too small for the 810s (half the tasks).
  EXPECT_DOUBLE_EQ(measure.node_fragment(32000, std::vector<uint32_t>{190, 1000}), 0.5 * 190);
  // 100 free: too small for both.
  EXPECT_DOUBLE_EQ(measure.node_fragment(32000, std::vector<uint32_t>{100, 1000}), 100);
  // No CPU left for anyone: every free thousandth is a fragment.
  EXPECT_DOUBLE_EQ(measure.node_fragment(3000, std::vector<uint32_t>{190, 1000}), 1190);
  EXPECT_DOUBLE_EQ(measure.node_fragment(32000, std::vector<uint32_t>{0, 0}), 0);
}

TEST(FragmentationMeasure, WholeGpuTasksCannotUseAPartlyTakenGpu) {
  std::vector<Demand> workload{demand(4, 2, 1000)};
  const FragmentationMeasure measure(workload, 100);
  // Two untouched GPUs: nothing lost; one taken in part: all of it.
  EXPECT_DOUBLE_EQ(measure.node_fragment(32000, std::vector<uint32_t>{1000, 1000, 400}), 400);
  EXPECT_DOUBLE_EQ(measure.node_fragment(32000, std::vector<uint32_t>{1000, 400}), 1400);
}

TEST(FragmentationMeasure, KeepsThePopularKindsTenAtATime) {
  std::vector<Demand> workload;
  for (uint32_t kind = 1; kind <= 30; ++kind) {
    for (uint32_t copies = 0; copies < 31 - kind; ++copies)
      workload.push_back(demand(1, 1, 10 * kind));
  }
  workload.push_back(demand(1, 0, 0));  // CPU-only tasks are not kinds
  // The ten most popular kinds hold 255 of the 465 GPU tasks (55%), twenty
  // hold 410 (88%).
  EXPECT_EQ(FragmentationMeasure(workload, 50).kinds(), 10U);
  EXPECT_EQ(FragmentationMeasure(workload, 60).kinds(), 20U);
  EXPECT_EQ(FragmentationMeasure(workload, 88).kinds(), 20U);
  EXPECT_EQ(FragmentationMeasure(workload, 90).kinds(), 30U);
}

TEST(FgdPlacement, FillsTheGpuTheTaskFitsBest) {
  const auto workload = two_kinds();
  const FragmentationMeasure measure(workload, 100);
  const std::vector<NodeSpec> specs{node_spec("a", 64, 2), node_spec("b", 64, 2)};
  ClusterState cluster(pointers(specs), nullptr);
  ASSERT_TRUE(cluster.place(1, demand(4, 1, 810), Gpus{1}));
  PolicyPlacer fgd(Policy::kFgd, &measure);
  // A 160 goes into b's GPU 1: its 190 free are a fragment for the 810s,
  // and the 30 left are a smaller one (growth -65); an untouched GPU of a
  // would keep 840, still room for an 810 (growth 0).
  const auto choice = fgd.choose(cluster, demand(4, 1, 160));
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->node, 1U);
  EXPECT_EQ(choice->gpus, Gpus{1});
  // Slurm picks b too (its CPU best fit: b has 60 free, a 64), but then
  // the first GPU with room, GPU 0, and leaves the 190 stranded.
  PolicyPlacer first_fit(Policy::kSlurmFirstFit, nullptr);
  const auto slurm = first_fit.choose(cluster, demand(4, 1, 160));
  ASSERT_TRUE(slurm);
  EXPECT_EQ(slurm->node, 1U);
  EXPECT_EQ(slurm->gpus, Gpus{0});
}

TEST(BestFitPlacement, TakesTheNodeLeftWithTheLeast) {
  const std::vector<NodeSpec> specs{node_spec("a", 64, 2), node_spec("b", 64, 2)};
  ClusterState cluster(pointers(specs), nullptr);
  ASSERT_TRUE(cluster.place(1, demand(32, 1, 500), Gpus{0}));
  PolicyPlacer best_fit(Policy::kBestFit, nullptr);
  const auto choice = best_fit.choose(cluster, demand(4, 1, 400));
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->node, 1U);
  EXPECT_EQ(choice->gpus, Gpus{0}) << "the tightest GPU";
}

TEST(PolicyNames, RoundTrip) {
  for (Policy policy : all_policies())
    EXPECT_EQ(parse_policy(policy_name(policy)), policy);
  EXPECT_FALSE(parse_policy("worst-fit"));
}

}  // namespace
}  // namespace egpu::clustersim
