// The experiments: workload inflation and the GPUs-needed search, on small
// clusters with known answers and on the openb trace itself.
#include "tools/clustersim/experiments.h"

#include <gtest/gtest.h>

#include <memory>

#include "test_cluster.h"
#include "tools/clustersim/colocation.h"

namespace egpu::clustersim {
namespace {

using test::node_spec;

const std::string kDir = EGPU_OPENB_DIR;

TaskSpec task(uint32_t cpus, uint32_t gpus, uint32_t milli, Qos qos = Qos::kOther) {
  TaskSpec spec;
  spec.name = "t";
  spec.cpu_milli = cpus * 1000;
  spec.memory_mib = 1024;
  spec.gpus = gpus;
  spec.gpu_milli = gpus == 0 ? 0 : milli;
  spec.qos = qos;
  return spec;
}

TEST(GpusNeeded, TheFewestNodesThatHoldEveryTask) {
  // 1-GPU nodes: 0.6, 0.6, 0.4, 0.4 pack into two GPUs (each 0.4 joins a
  // 0.6, on the node Slurm's CPU best fit prefers); whole GPUs need four.
  const std::vector<NodeSpec> nodes{node_spec("a", 64, 1)};
  const std::vector<TaskSpec> tasks{task(1, 1, 600), task(1, 1, 600), task(1, 1, 400),
                                    task(1, 1, 400)};
  config::EgpuConfig egpu;
  SimulationSetup setup{nodes, tasks, Granularity::kSlurm, &egpu, nullptr};
  EXPECT_EQ(gpus_needed(setup, Policy::kSlurmFirstFit, 1).gpus, 2U);
  EXPECT_EQ(gpus_needed(setup, Policy::kWholeGpus, 1).gpus, 4U);
}

TEST(GpusNeeded, OrderMattersForFirstFit) {
  // The same four shares: 0.3, 0.8, 0.7, 0.2 pack into two GPUs (0.3+0.7,
  // 0.8+0.2); 0.3, 0.2, 0.8, 0.7 take three (0.3+0.2, 0.8, 0.7).
  const std::vector<NodeSpec> nodes{node_spec("a", 64, 1)};
  config::EgpuConfig egpu;
  const std::vector<TaskSpec> packs{task(1, 1, 300), task(1, 1, 800), task(1, 1, 700),
                                    task(1, 1, 200)};
  EXPECT_EQ(
      gpus_needed({nodes, packs, Granularity::kSlurm, &egpu, nullptr}, Policy::kSlurmFirstFit, 1)
          .gpus,
      2U);
  const std::vector<TaskSpec> strands{task(1, 1, 300), task(1, 1, 200), task(1, 1, 800),
                                      task(1, 1, 700)};
  EXPECT_EQ(
      gpus_needed({nodes, strands, Granularity::kSlurm, &egpu, nullptr}, Policy::kSlurmFirstFit, 1)
          .gpus,
      3U);
}

TEST(PlaceInOrder, EachTaskWhereThePolicyPutsIt) {
  const std::vector<NodeSpec> nodes{node_spec("a", 16, 2)};
  const std::vector<TaskSpec> tasks{task(1, 1, 600), task(1, 1, 300), task(1, 1, 500),
                                    task(1, 1, 700)};
  config::EgpuConfig egpu;
  const SimulationSetup setup{nodes, tasks, Granularity::kSlurm, &egpu, nullptr};
  const auto placed = place_in_order(setup, Policy::kSlurmFirstFit);
  ASSERT_EQ(placed.size(), 4U);
  ASSERT_TRUE(placed[0] && placed[1] && placed[2]);
  EXPECT_EQ(placed[0]->gpus, std::vector<uint32_t>{0});
  EXPECT_EQ(placed[1]->gpus, std::vector<uint32_t>{0});
  EXPECT_EQ(placed[2]->gpus, std::vector<uint32_t>{1});
  EXPECT_FALSE(placed[3]) << "0.7 fits no GPU left";
  const auto least_loaded = place_in_order(setup, Policy::kSlurmLeastLoaded);
  ASSERT_TRUE(least_loaded[1]);
  EXPECT_EQ(least_loaded[1]->gpus, std::vector<uint32_t>{1});
}

TEST(NodeSample, RepeatsTheTraceNodesInOneSeededOrder) {
  const std::vector<NodeSpec> nodes{node_spec("a", 8, 1), node_spec("b", 8, 2),
                                    node_spec("c", 8, 4)};
  const auto sample = node_sample(nodes, 9, 7);
  ASSERT_EQ(sample.size(), 7U);
  for (std::size_t i = 3; i < 7; ++i)
    EXPECT_EQ(sample[i], sample[i - 3]);
  EXPECT_EQ(node_sample(nodes, 9, 7), sample);
}

class OpenbInflation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded_nodes = load_openb_nodes(kDir + "/openb_node_list_gpu_node.csv");
    auto loaded_tasks = load_openb_tasks(kDir + "/openb_pod_list_default.csv");
    ASSERT_TRUE(loaded_nodes && loaded_tasks);
    nodes_ = std::make_unique<std::vector<NodeSpec>>(std::move(*loaded_nodes));
    tasks_ = std::make_unique<std::vector<TaskSpec>>(std::move(*loaded_tasks));
  }
  static void TearDownTestSuite() {
    nodes_.reset();
    tasks_.reset();
  }
  SimulationSetup setup(const FragmentationMeasure* measure) const {
    return {*nodes_, *tasks_, Granularity::kSlurm, &egpu_, measure};
  }
  static inline std::unique_ptr<std::vector<NodeSpec>> nodes_;
  static inline std::unique_ptr<std::vector<TaskSpec>> tasks_;
  config::EgpuConfig egpu_;
};

TEST_F(OpenbInflation, CurvesAreWellFormedAndTheSameForTheSameSeed) {
  const InflationRun run = run_inflation(setup(nullptr), Policy::kSlurmFirstFit, 4);
  ASSERT_EQ(run.allocated_pct.size(), 101U);
  ASSERT_EQ(run.placed_pct.size(), 101U);
  EXPECT_EQ(run.allocated_pct.front(), 0);
  for (std::size_t p = 1; p <= 100; ++p) {
    EXPECT_GE(run.allocated_pct[p], run.allocated_pct[p - 1]) << p;
    // Nothing is placed that has not arrived; egpu units round requests up.
    EXPECT_LE(run.placed_pct[p], static_cast<double>(p) + 1) << p;
    EXPECT_GE(run.allocated_pct[p], run.placed_pct[p]) << p;
    EXPECT_LE(run.allocated_pct[p], 100) << p;
  }
  EXPECT_GT(run.tasks_dropped, 0U) << "at full load some tasks fit nowhere";
  EXPECT_EQ(run.final_state.gpu_allocated_milli(),
            static_cast<uint64_t>(run.allocated_pct.back() * 6212 * 10 + 0.5));
  const InflationRun again = run_inflation(setup(nullptr), Policy::kSlurmFirstFit, 4);
  EXPECT_EQ(again.allocated_pct, run.allocated_pct);
  EXPECT_EQ(again.tasks_dropped, run.tasks_dropped);
  const InflationRun other = run_inflation(setup(nullptr), Policy::kSlurmFirstFit, 5);
  EXPECT_NE(other.allocated_pct, run.allocated_pct);
}

TEST_F(OpenbInflation, EveryPolicyKeepsEveryNodeWithinItsResources) {
  std::vector<Demand> workload;
  for (const TaskSpec& spec : *tasks_)
    workload.push_back(to_demand(spec, Granularity::kSlurm));
  const FragmentationMeasure measure(workload);
  for (const bool multiple_sharing : {false, true}) {
    SimulationSetup with = setup(&measure);
    with.multiple_sharing = multiple_sharing;
    for (Policy policy : all_policies()) {
      SCOPED_TRACE(std::string(policy_name(policy)) + (multiple_sharing ? ", split" : ""));
      const InflationRun run = run_inflation(with, policy, 1);
      // Recount every node's use from the placements alone (64-bit: an
      // over-allocation cannot wrap) and hold it against the node's size.
      uint64_t allocated = 0;
      std::vector<std::vector<uint64_t>> gpu_used(nodes_->size());
      std::vector<uint64_t> cpu_used(nodes_->size(), 0), memory_used(nodes_->size(), 0);
      for (std::size_t n = 0; n < nodes_->size(); ++n)
        gpu_used[n].assign((*nodes_)[n].gpus, 0);
      for (const auto& placed : run.final_state.live()) {
        ASSERT_EQ(placed.gpus->size(), placed.milli->size());
        for (std::size_t i = 0; i < placed.gpus->size(); ++i) {
          gpu_used[placed.node][(*placed.gpus)[i]] += (*placed.milli)[i];
        }
        cpu_used[placed.node] += placed.demand->cpu_milli;
        memory_used[placed.node] += placed.demand->memory_mib;
        allocated += placed.demand->gpu_demand_milli();
      }
      for (std::size_t n = 0; n < nodes_->size(); ++n) {
        const NodeState& state = run.final_state.node(n);
        ASSERT_LE(cpu_used[n], (*nodes_)[n].cpu_milli) << "node " << n;
        ASSERT_EQ(cpu_used[n] + state.cpu_free_milli, (*nodes_)[n].cpu_milli) << "node " << n;
        ASSERT_LE(memory_used[n], (*nodes_)[n].memory_mib) << "node " << n;
        for (std::size_t g = 0; g < gpu_used[n].size(); ++g) {
          ASSERT_LE(gpu_used[n][g], 1000U) << "node " << n << " GPU " << g;
          ASSERT_EQ(gpu_used[n][g] + state.gpu_free_milli[g], 1000U)
              << "node " << n << " GPU " << g;
        }
      }
      EXPECT_EQ(allocated, run.final_state.gpu_allocated_milli());
      EXPECT_EQ(run.agent_refusals, 0U) << "64 instances per GPU";
      if (!multiple_sharing) {
        EXPECT_EQ(run.tasks_split, 0U);
      }
    }
  }
}

TEST_F(OpenbInflation, FaaGivesLatencySensitiveTasksWhatTheyAsked) {
  const InflationRun run = run_inflation(setup(nullptr), Policy::kSlurmFirstFit, 1);
  const ColocationShares shares = colocation_shares(run.final_state);
  ASSERT_GT(shares.gpus, 100U);
  ASSERT_GT(shares.ls_faa.tasks, 100U);
  // FAA's precision bar: within a few percent of the asked share, every task.
  EXPECT_GE(shares.ls_faa.min_ratio, 0.95);
  EXPECT_EQ(shares.ls_faa.below_95_pct, 0);
  EXPECT_GE(shares.be_faa.min_ratio, 0.95);
  // Without enforcement an LS task beside larger BE ones gets less than it asked.
  EXPECT_LT(shares.ls_time_slicing.min_ratio, 0.9);
}

}  // namespace
}  // namespace egpu::clustersim
