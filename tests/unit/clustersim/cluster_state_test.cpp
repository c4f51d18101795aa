// The simulated cluster: what placing and releasing do, and the egpu agents'
// admission of shares (the product's own InstanceRegistry).
#include "tools/clustersim/cluster_state.h"

#include <gtest/gtest.h>

#include <random>

#include "test_cluster.h"

namespace egpu::clustersim {
namespace {

using test::demand;
using test::node_spec;
using test::pointers;
using Gpus = std::vector<uint32_t>;

TEST(ClusterState, PlaceTakesAndReleaseGivesBack) {
  const std::vector<NodeSpec> specs{node_spec("a", 32, 4)};
  config::EgpuConfig egpu;
  ClusterState cluster(pointers(specs), &egpu);
  EXPECT_EQ(cluster.gpu_capacity_milli(), 4000U);
  auto share = cluster.place(0, demand(8, 1, 300), Gpus{2});
  ASSERT_TRUE(share) << share.error();
  auto whole = cluster.place(0, demand(4, 2, 1000), Gpus{0, 1});
  ASSERT_TRUE(whole) << whole.error();
  EXPECT_EQ(cluster.node(0).cpu_free_milli, 20000U);
  EXPECT_EQ(cluster.node(0).gpu_free_milli, (Gpus{0, 0, 700, 1000}));
  EXPECT_EQ(cluster.gpu_allocated_milli(), 2300U);
  EXPECT_EQ(cluster.agent_allocated_units(0, 2), 30U);
  EXPECT_EQ(cluster.agent_allocated_units(0, 0), 0U)
      << "whole GPUs are gres/gpu's, not the agent's";
  cluster.release(*share);
  cluster.release(*share);  // twice: nothing more
  EXPECT_EQ(cluster.node(0).gpu_free_milli, (Gpus{0, 0, 1000, 1000}));
  EXPECT_EQ(cluster.agent_allocated_units(0, 2), 0U);
  EXPECT_EQ(cluster.node(0).cpu_free_milli, 28000U);
  EXPECT_EQ(cluster.live().size(), 1U);
}

TEST(ClusterState, RefusesWhatDoesNotFit) {
  const std::vector<NodeSpec> specs{node_spec("a", 8, 2)};
  ClusterState cluster(pointers(specs), nullptr);
  EXPECT_FALSE(cluster.place(0, demand(16, 1, 100), Gpus{0}));
  EXPECT_FALSE(cluster.place(0, demand(1, 1, 100), Gpus{5}));
  EXPECT_FALSE(cluster.place(0, demand(1, 2, 1000), Gpus{1, 1}));
  EXPECT_FALSE(cluster.place(0, demand(1, 2, 1000), Gpus{1}));
  ASSERT_TRUE(cluster.place(0, demand(1, 1, 700), Gpus{0}));
  EXPECT_FALSE(cluster.place(0, demand(1, 1, 400), Gpus{0}));
  EXPECT_EQ(cluster.node(0).cpu_free_milli, 7000U) << "a refusal changes nothing";
}

TEST(ClusterState, TheAgentRefusesPastItsInstancesPerGpu) {
  const std::vector<NodeSpec> specs{node_spec("a", 64, 1)};
  config::EgpuConfig egpu;
  egpu.max_instances_per_gpu = 2;
  ClusterState cluster(pointers(specs), &egpu);
  ASSERT_TRUE(cluster.place(0, demand(1, 1, 100), Gpus{0}));
  ASSERT_TRUE(cluster.place(0, demand(1, 1, 100), Gpus{0}));
  auto third = cluster.place(0, demand(1, 1, 100), Gpus{0});
  ASSERT_FALSE(third);
  EXPECT_NE(third.error().find("the egpu agent of a refuses"), std::string::npos) << third.error();
  EXPECT_EQ(cluster.node(0).gpu_free_milli, Gpus{800});
}

TEST(ClusterState, SharesMustBeWholeUnitsWhereAgentsAdmit) {
  const std::vector<NodeSpec> specs{node_spec("a", 64, 1)};
  config::EgpuConfig egpu;
  ClusterState cluster(pointers(specs), &egpu);
  EXPECT_FALSE(cluster.place(0, demand(1, 1, 455), Gpus{0}));
  ClusterState no_agent(pointers(specs), nullptr);
  EXPECT_TRUE(no_agent.place(0, demand(1, 1, 455), Gpus{0}));
}

TEST(ClusterState, ToDemandRoundsAsSlurmAndEgpuCount) {
  TaskSpec task;
  task.cpu_milli = 8800;
  task.gpus = 1;
  task.gpu_milli = 455;
  const Demand slurm = to_demand(task, Granularity::kSlurm);
  EXPECT_EQ(slurm.cpu_milli, 9000U);
  EXPECT_EQ(slurm.gpu_milli, 460U);
  const Demand trace = to_demand(task, Granularity::kTrace);
  EXPECT_EQ(trace.cpu_milli, 8800U);
  EXPECT_EQ(trace.gpu_milli, 455U);
  EXPECT_EQ(to_demand(task, Granularity::kSlurm, /*whole_gpus=*/true).gpu_milli, 1000U);
}

// Random places and releases: the free units the simulator keeps for Slurm
// always agree with what the node's agent has admitted.
TEST(ClusterState, FreeUnitsAgreeWithTheAgents) {
  const std::vector<NodeSpec> specs{node_spec("a", 512, 4), node_spec("b", 512, 2)};
  config::EgpuConfig egpu;
  ClusterState cluster(pointers(specs), &egpu);
  std::mt19937_64 random(3);
  std::vector<TaskId> live;
  for (int step = 0; step < 2000; ++step) {
    if (!live.empty() && random() % 3 == 0) {
      const std::size_t pick = random() % live.size();
      cluster.release(live[pick]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
    } else {
      const std::size_t node = random() % 2;
      const uint32_t gpu = static_cast<uint32_t>(random() % specs[node].gpus);
      const uint32_t milli = static_cast<uint32_t>(10 * (1 + random() % 60));
      if (auto id = cluster.place(node, demand(1, 1, milli), Gpus{gpu})) live.push_back(*id);
    }
    for (std::size_t node = 0; node < 2; ++node) {
      for (uint32_t gpu = 0; gpu < specs[node].gpus; ++gpu) {
        ASSERT_EQ(cluster.node(node).gpu_free_milli[gpu],
                  1000 - 10 * cluster.agent_allocated_units(node, gpu))
            << "step " << step << ", node " << node << ", GPU " << gpu;
      }
    }
  }
}

}  // namespace
}  // namespace egpu::clustersim
