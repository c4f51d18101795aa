// The experiments of the cluster simulator, each on the same arrivals for
// every policy:
// - workload inflation, as in FGD (section 6.1): tasks drawn at random (with
//   replacement) from the trace arrive one by one and never leave, until their
//   GPU requests reach the cluster's GPU capacity; a task that fits nowhere is
//   dropped. Measured at each percent of arrived load: GPUs allocated and the
//   requests of the tasks placed, as fractions of the capacity.
// - GPUs needed: the fewest nodes (the trace's nodes in a seeded random
//   order, repeated past its end) on which every task of the trace, arriving
//   in trace order and never leaving (the trace is a snapshot of one
//   cluster's tasks), finds a place; their GPU count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/config/egpu_config.h"
#include "tools/clustersim/cluster_state.h"
#include "tools/clustersim/openb_trace.h"
#include "tools/clustersim/placement_policy.h"

namespace egpu::clustersim {

struct SimulationSetup {
  std::span<const NodeSpec> nodes;
  std::span<const TaskSpec> tasks;
  Granularity granularity = Granularity::kSlurm;
  // The agents' settings (admission of shares); null: no agent (with kTrace).
  const config::EgpuConfig* egpu = nullptr;
  // FGD's popularity of task kinds: the trace's tasks as scheduled.
  const FragmentationMeasure* measure = nullptr;
  // Slurm's MULTIPLE_SHARING_GRES_PJ: a share may be split over GPUs.
  bool multiple_sharing = false;
};

struct InflationRun {
  // Index p: when p percent of the capacity had arrived (p = 0..100).
  std::vector<double> allocated_pct;  // GPUs handed out / capacity
  std::vector<double> placed_pct;     // the placed tasks' own requests / capacity
  uint64_t tasks_arrived = 0;
  uint64_t tasks_dropped = 0;
  uint64_t agent_refusals = 0;  // placements Slurm made that the agent refused
  uint64_t tasks_split = 0;     // shares placed split over several GPUs
  ClusterState final_state;     // the cluster at full load
};

InflationRun run_inflation(const SimulationSetup& setup, Policy policy, uint64_t seed);

struct GpusNeeded {
  uint64_t nodes = 0;
  uint64_t gpus = 0;
};

GpusNeeded gpus_needed(const SimulationSetup& setup, Policy policy, uint64_t seed);

// The tasks placed in trace order on the nodes in file order, none leaving:
// where each went (nullopt: it fits nowhere or its node's agent refused it).
// What `egpu-clustersim --place-in-order` prints, and what the Slurm test
// tests/slurm/placement_model.sh compares with a real slurmctld.
std::vector<std::optional<Choice>> place_in_order(const SimulationSetup& setup, Policy policy);

// The trace's nodes in a seeded random order, `count` of them (repeating the
// order past its end).
std::vector<const NodeSpec*> node_sample(std::span<const NodeSpec> nodes, uint64_t seed,
                                         uint64_t count);

}  // namespace egpu::clustersim
