// A simulated cluster's free resources, node by node and GPU by GPU, as Slurm
// and the egpu agents see them. A task's share of one GPU is admitted by the
// agent's own rules (core/model InstanceRegistry, one per node, built from the
// site's egpu.conf): what the product would refuse, the simulation refuses.
// Whole GPUs are Slurm's gres/gpu and never pass the agent.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config/egpu_config.h"
#include "core/model/instance_registry.h"
#include "core/util/result.h"
#include "tools/clustersim/openb_trace.h"

namespace egpu::clustersim {

inline constexpr uint32_t kMilliPerGpu = 1000;

// One task as the scheduler counts it (see to_demand()).
struct Demand {
  uint32_t cpu_milli = 0;
  uint64_t memory_mib = 0;
  uint32_t gpus = 0;                                 // 0: CPU only
  uint32_t gpu_milli = 0;                            // per GPU; kMilliPerGpu: whole GPUs
  const std::vector<std::string>* models = nullptr;  // allowed GPU models; null or empty: any
  Qos qos = Qos::kOther;

  bool shares_gpu() const { return gpus == 1 && gpu_milli < kMilliPerGpu; }
  uint64_t gpu_demand_milli() const { return static_cast<uint64_t>(gpus) * gpu_milli; }
};

// How requests are rounded before scheduling.
enum class Granularity {
  kSlurm,  // whole CPUs (cons_tres), GPU shares in egpu units (1/100 of a GPU)
  kTrace,  // the trace's own thousandths, as FGD's simulator counts
};
// kWholeGpus: every GPU task takes whole GPUs (a share is rounded up to one GPU).
// The Demand points into `task` (its GPU models): the task must outlive it.
Demand to_demand(const TaskSpec& task, Granularity granularity, bool whole_gpus = false);
Demand to_demand(TaskSpec&& task, Granularity granularity, bool whole_gpus = false) = delete;

struct NodeState {
  uint32_t cpu_free_milli = 0;
  uint64_t memory_free_mib = 0;
  std::vector<uint32_t> gpu_free_milli;  // per GPU, by index
  const NodeSpec* spec = nullptr;
};

using TaskId = uint64_t;

class ClusterState {
 public:
  // `nodes[i]` is node i. `egpu`: the agents' settings, for their admission
  // of shares (egpu units must be whole); null: no agent (FGD's own model, in
  // the trace's thousandths of a GPU).
  ClusterState(std::vector<const NodeSpec*> nodes, const config::EgpuConfig* egpu);
  ClusterState(ClusterState&&) noexcept;
  ClusterState& operator=(ClusterState&&) noexcept;
  ~ClusterState();

  std::size_t node_count() const { return nodes_.size(); }
  const NodeState& node(std::size_t i) const { return nodes_[i]; }
  // Bumped on every change to node i (callers cache what they derive from it).
  uint64_t version(std::size_t i) const { return versions_[i]; }

  // Whether the task's CPU, memory and GPU model fit the node (not its GPUs).
  bool host_fits(std::size_t node, const Demand& demand) const;
  // Places the task on `gpus` of `node` (empty for a CPU-only task), each
  // giving the task's per-GPU share, or for a share Slurm split over several
  // GPUs (MULTIPLE_SHARING_GRES_PJ) the parts in `split`. A share goes
  // through the node agent's admission (an instance per GPU); a refusal is
  // returned and nothing changes. `demand` is copied; the TaskSpec its
  // `models` points into must outlive the state.
  Result<TaskId> place(std::size_t node, const Demand& demand, std::span<const uint32_t> gpus,
                       std::span<const uint32_t> split = {});
  // Frees what place() took.
  void release(TaskId task);

  struct Placed {
    std::size_t node;
    const Demand* demand;
    const std::vector<uint32_t>* gpus;
    const std::vector<uint32_t>* milli;  // what each of `gpus` gives it
  };
  // Every task placed and not released, in the order placed. The pointers
  // are valid until the next place().
  std::vector<Placed> live() const;

  uint64_t gpu_capacity_milli() const { return gpu_capacity_milli_; }
  uint64_t gpu_allocated_milli() const { return gpu_allocated_milli_; }
  // The agent's count of units allocated on a GPU (for tests of the mirror).
  uint32_t agent_allocated_units(std::size_t node, uint32_t gpu) const;

 private:
  // The node agent's admission of a share's instances (all or none).
  Result<bool> admit(std::size_t node, TaskId id, std::span<const uint32_t> gpus,
                     const std::vector<uint32_t>& milli);

  struct Allocation {
    std::size_t node;
    Demand demand;
    std::vector<uint32_t> gpus;
    std::vector<uint32_t> milli;  // per GPU in `gpus`
    bool live;
  };

  std::vector<NodeState> nodes_;
  std::vector<uint64_t> versions_;
  // One agent registry per node, created on the node's first share.
  std::vector<std::unique_ptr<model::InstanceRegistry>> agents_;
  bool agent_admission_;
  uint32_t max_instances_per_gpu_;
  std::vector<Allocation> allocations_;  // by TaskId
  uint64_t gpu_capacity_milli_ = 0;
  uint64_t gpu_allocated_milli_ = 0;
};

}  // namespace egpu::clustersim
