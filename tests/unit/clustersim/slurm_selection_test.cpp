// The model of Slurm's choices (cons_tres): GPUs on a node, and the node.
#include "tools/clustersim/slurm_selection.h"

#include <gtest/gtest.h>

#include "core/model/node_weight.h"
#include "test_cluster.h"

namespace egpu::clustersim {
namespace {

using test::demand;
using test::node_spec;
using test::pointers;

NodeState gpus_free(std::vector<uint32_t> free) {
  NodeState state;
  state.cpu_free_milli = 64000;
  state.memory_free_mib = 1 << 20;
  state.gpu_free_milli = std::move(free);
  return state;
}

using Gpus = std::vector<uint32_t>;

TEST(SlurmGpuPick, ShareGoesToTheFirstGpuWithRoomInIndexOrder) {
  const NodeState node = gpus_free({200, 700, 1000, 500});
  EXPECT_EQ(pick_gpus(node, demand(1, 1, 300), GpuOrder::kIndex), Gpus{1});
  EXPECT_EQ(pick_gpus(node, demand(1, 1, 200), GpuOrder::kIndex), Gpus{0});
  EXPECT_EQ(pick_gpus(node, demand(1, 1, 800), GpuOrder::kIndex), Gpus{2});
  EXPECT_FALSE(pick_gpus(gpus_free({200, 100}), demand(1, 1, 300), GpuOrder::kIndex));
}

TEST(SlurmGpuPick, LeastLoadedTakesTheGpuWithTheMostFreeFirstIndexOnATie) {
  const NodeState node = gpus_free({700, 1000, 500, 1000});
  EXPECT_EQ(pick_gpus(node, demand(1, 1, 300), GpuOrder::kLeastLoaded), Gpus{1});
}

TEST(SlurmGpuPick, BestFitTakesTheTightestGpu) {
  const NodeState node = gpus_free({700, 1000, 350, 300});
  EXPECT_EQ(pick_gpus(node, demand(1, 1, 300), GpuOrder::kBestFit), Gpus{3});
  EXPECT_EQ(pick_gpus(node, demand(1, 1, 320), GpuOrder::kBestFit), Gpus{2});
}

TEST(SlurmGpuPick, WholeGpusAreUntouchedOnesInIndexOrder) {
  const NodeState node = gpus_free({1000, 990, 1000, 1000});
  EXPECT_EQ(pick_gpus(node, demand(1, 2, 1000), GpuOrder::kIndex), (Gpus{0, 2}));
  EXPECT_EQ(pick_gpus(node, demand(1, 3, 1000), GpuOrder::kLeastLoaded), (Gpus{0, 2, 3}));
  EXPECT_FALSE(pick_gpus(node, demand(1, 4, 1000), GpuOrder::kIndex));
  EXPECT_EQ(pick_gpus(node, demand(1, 0, 0), GpuOrder::kIndex), Gpus{});
}

class SlurmNodePick : public ::testing::Test {
 protected:
  // Free CPUs per node; every node has one GPU.
  ClusterState cluster_with_free_cpus(const std::vector<uint32_t>& cpus) {
    specs_.clear();
    for (std::size_t i = 0; i < cpus.size(); ++i) {
      specs_.push_back(node_spec("n" + std::to_string(i), cpus[i], 1));
    }
    return ClusterState(pointers(specs_), nullptr);
  }
  std::vector<NodeSpec> specs_;
};

TEST_F(SlurmNodePick, BestFitByCpusInTheRunWithTheFewestCpus) {
  // Runs of nodes where a 4-CPU task fits: {n0} with 64 CPUs and {n2, n3}
  // with 48; n1 (2 CPUs) ends the first run. The smaller run wins, and in it
  // the node with the fewest CPUs.
  ClusterState cluster = cluster_with_free_cpus({64, 2, 32, 16});
  EXPECT_EQ(slurm_pick_node(cluster, demand(4, 1, 500), GpuOrder::kIndex), 3U);
}

TEST_F(SlurmNodePick, NotTheNodeWithTheFewestCpusOverall) {
  // The run decides first: {n0, n1} holds 36 CPUs, {n3} 8, so n3 wins
  // although n0 has fewer CPUs.
  ClusterState cluster = cluster_with_free_cpus({6, 30, 2, 8});
  EXPECT_EQ(slurm_pick_node(cluster, demand(4, 1, 500), GpuOrder::kIndex), 3U);
  // A 7-CPU task fits n1 and n3 only, each a run of its own.
  EXPECT_EQ(slurm_pick_node(cluster, demand(7, 1, 500), GpuOrder::kIndex), 3U);
  EXPECT_EQ(slurm_pick_node(cluster, demand(9, 1, 500), GpuOrder::kIndex), 1U);
}

TEST_F(SlurmNodePick, TiesGoToTheFirst) {
  ClusterState cluster = cluster_with_free_cpus({16, 2, 16});
  EXPECT_EQ(slurm_pick_node(cluster, demand(4, 1, 500), GpuOrder::kIndex), 0U);
}

TEST_F(SlurmNodePick, ANodeWhoseGpusAreFullEndsARun) {
  ClusterState cluster = cluster_with_free_cpus({20, 64, 16, 64});
  const Demand big = demand(1, 1, 800);
  // One run of all four nodes: n2 has the fewest CPUs.
  EXPECT_EQ(slurm_pick_node(cluster, big, GpuOrder::kIndex), 2U);
  ASSERT_TRUE(cluster.place(1, big, Gpus{0}));
  // n1 has no room for another 800 and splits the run: {n0} holds 20
  // CPUs, {n2, n3} 80, so n0 wins although n2 has fewer CPUs.
  EXPECT_EQ(slurm_pick_node(cluster, big, GpuOrder::kIndex), 0U);
  // A share that still fits on n1 sees one run again.
  EXPECT_EQ(slurm_pick_node(cluster, demand(1, 1, 200), GpuOrder::kIndex), 2U);
}

TEST_F(SlurmNodePick, MultipleSharingSplitsAShareNoGpuHasRoomFor) {
  specs_ = {node_spec("a", 16, 3)};
  ClusterState three(pointers(specs_), nullptr);
  ASSERT_TRUE(three.place(0, demand(1, 1, 700), Gpus{0}));
  ASSERT_TRUE(three.place(0, demand(1, 1, 600), Gpus{1}));
  ASSERT_TRUE(three.place(0, demand(1, 1, 500), Gpus{2}));
  const Demand share = demand(1, 1, 900);
  EXPECT_FALSE(slurm_pick_node(three, share, GpuOrder::kIndex));
  ASSERT_EQ(slurm_pick_node(three, share, GpuOrder::kIndex, {}, true), 0U);
  const auto split = pick_split_share(three.node(0), share, GpuOrder::kIndex);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->gpus, (Gpus{0, 1, 2}));
  EXPECT_EQ(split->milli, (Gpus{300, 400, 200}));
  const auto by_load = pick_split_share(three.node(0), share, GpuOrder::kLeastLoaded);
  ASSERT_TRUE(by_load);
  EXPECT_EQ(by_load->gpus, (Gpus{2, 1}));
  EXPECT_EQ(by_load->milli, (Gpus{500, 400}));
  auto placed = three.place(0, share, split->gpus, split->milli);
  ASSERT_TRUE(placed) << placed.error();
  EXPECT_EQ(three.node(0).gpu_free_milli, (Gpus{0, 0, 300}));
  three.release(*placed);
  EXPECT_EQ(three.node(0).gpu_free_milli, (Gpus{300, 400, 500}));
  EXPECT_FALSE(pick_split_share(three.node(0), demand(1, 1, 1000), GpuOrder::kIndex))
      << "a whole GPU is never split";
}

TEST_F(SlurmNodePick, OnlyTheLightestNodesWhereTheJobFitsTakePart) {
  ClusterState cluster = cluster_with_free_cpus({8, 64, 64, 32});
  const std::vector<uint64_t> weights{5, 1, 1, 1};
  // n0 has the fewest CPUs but is heavier; among n1..n3 (one run) n3 wins.
  EXPECT_EQ(slurm_pick_node(cluster, demand(4, 1, 500), GpuOrder::kIndex, weights), 3U);
  // A heavier node is still used when it is the only one that fits:
  // weights order nodes, they never forbid one.
  ClusterState uneven = cluster_with_free_cpus({64, 8, 8, 8});
  EXPECT_EQ(slurm_pick_node(uneven, demand(16, 1, 500), GpuOrder::kIndex, weights), 0U);
  // Lightest nodes where it does not fit do not count: n3 is too small for
  // 40 CPUs, so the choice is among n1 and n2 (weight 2).
  EXPECT_EQ(slurm_pick_node(cluster, demand(40, 1, 500), GpuOrder::kIndex,
                            std::vector<uint64_t>{3, 2, 2, 1}),
            1U);
}

TEST(FreeUnitsWeight, IsWhatThePluginSetsForTheFreeUnits) {
  NodeState node = gpus_free({1000, 300, 0});  // 100 + 30 units free
  EXPECT_EQ(free_units_weight(node), egpu_packed_node_weight(0, 130));
  EXPECT_EQ(free_units_weight(node) - free_units_weight(gpus_free({0, 0})), 130U);
}

TEST_F(SlurmNodePick, GpuModelsLimitTheNodes) {
  specs_ = {node_spec("t4", 16, 2, "T4"), node_spec("v100", 64, 2, "V100M32")};
  ClusterState cluster(pointers(specs_), nullptr);
  Demand wants_v100 = demand(4, 1, 500);
  const std::vector<std::string> models{"V100M32"};
  wants_v100.models = &models;
  EXPECT_EQ(slurm_pick_node(cluster, wants_v100, GpuOrder::kIndex), 1U);
  EXPECT_EQ(slurm_pick_node(cluster, demand(4, 1, 500), GpuOrder::kIndex), 0U);
}

}  // namespace
}  // namespace egpu::clustersim
