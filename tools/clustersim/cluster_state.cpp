#include "tools/clustersim/cluster_state.h"

#include <algorithm>

#include "core/protocol/messages.h"

namespace egpu::clustersim {
namespace {

constexpr uint32_t kMilliPerUnit = kMilliPerGpu / protocol::kUnitsPerGpu;

uint32_t round_up(uint32_t value, uint32_t step) {
  return (value + step - 1) / step * step;
}

bool model_allowed(const Demand& demand, const std::string& model) {
  if (demand.models == nullptr || demand.models->empty()) return true;
  return std::find(demand.models->begin(), demand.models->end(), model) != demand.models->end();
}

}  // namespace

Demand to_demand(const TaskSpec& task, Granularity granularity, bool whole_gpus) {
  Demand demand;
  demand.cpu_milli = task.cpu_milli;
  demand.memory_mib = task.memory_mib;
  demand.gpus = task.gpus;
  demand.gpu_milli = task.gpu_milli;
  demand.models = &task.gpu_models;
  demand.qos = task.qos;
  if (granularity == Granularity::kSlurm) {
    // cons_tres allocates whole CPUs; egpu counts a GPU in 100 units.
    demand.cpu_milli = round_up(demand.cpu_milli, 1000);
    demand.gpu_milli = round_up(demand.gpu_milli, kMilliPerUnit);
  }
  if (whole_gpus && demand.gpus > 0) demand.gpu_milli = kMilliPerGpu;
  return demand;
}

ClusterState::ClusterState(std::vector<const NodeSpec*> nodes, const config::EgpuConfig* egpu)
    : versions_(nodes.size(), 0),
      agents_(nodes.size()),
      agent_admission_(egpu != nullptr),
      max_instances_per_gpu_(egpu ? static_cast<uint32_t>(egpu->max_instances_per_gpu) : 0) {
  nodes_.reserve(nodes.size());
  for (const NodeSpec* spec : nodes) {
    NodeState state;
    state.cpu_free_milli = spec->cpu_milli;
    state.memory_free_mib = spec->memory_mib;
    state.gpu_free_milli.assign(spec->gpus, kMilliPerGpu);
    state.spec = spec;
    gpu_capacity_milli_ += static_cast<uint64_t>(spec->gpus) * kMilliPerGpu;
    nodes_.push_back(std::move(state));
  }
}

ClusterState::ClusterState(ClusterState&&) noexcept = default;
ClusterState& ClusterState::operator=(ClusterState&&) noexcept = default;
ClusterState::~ClusterState() = default;

bool ClusterState::host_fits(std::size_t node, const Demand& demand) const {
  const NodeState& state = nodes_[node];
  return state.cpu_free_milli >= demand.cpu_milli && state.memory_free_mib >= demand.memory_mib &&
         state.gpu_free_milli.size() >= demand.gpus &&
         (demand.gpus == 0 || model_allowed(demand, state.spec->model));
}

Result<TaskId> ClusterState::place(std::size_t node, const Demand& demand,
                                   std::span<const uint32_t> gpus,
                                   std::span<const uint32_t> split) {
  NodeState& state = nodes_.at(node);
  if (!host_fits(node, demand)) return Error{"the task does not fit node " + state.spec->name};
  std::vector<uint32_t> milli;
  if (split.empty()) {
    if (gpus.size() != demand.gpus) {
      return Error{"the task needs " + std::to_string(demand.gpus) + " GPUs, " +
                   std::to_string(gpus.size()) + " were chosen"};
    }
    milli.assign(gpus.size(), demand.gpu_milli);
  } else {
    uint64_t total = 0;
    for (uint32_t part : split)
      total += part;
    if (!demand.shares_gpu() || split.size() != gpus.size() || total != demand.gpu_milli ||
        std::find(split.begin(), split.end(), 0U) != split.end()) {
      return Error{"a split must divide one share over the chosen GPUs"};
    }
    milli.assign(split.begin(), split.end());
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] >= state.gpu_free_milli.size() || state.gpu_free_milli[gpus[i]] < milli[i] ||
        std::find(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(i), gpus[i]) !=
            gpus.begin() + static_cast<std::ptrdiff_t>(i)) {
      return Error{"GPU " + std::to_string(gpus[i]) + " of node " + state.spec->name +
                   " cannot take the task"};
    }
  }
  const TaskId id = allocations_.size();
  if (agent_admission_ && demand.shares_gpu()) {
    if (auto admitted = admit(node, id, gpus, milli); !admitted) return Error{admitted.error()};
  }
  state.cpu_free_milli -= demand.cpu_milli;
  state.memory_free_mib -= demand.memory_mib;
  for (std::size_t i = 0; i < gpus.size(); ++i)
    state.gpu_free_milli[gpus[i]] -= milli[i];
  gpu_allocated_milli_ += demand.gpu_demand_milli();
  ++versions_[node];
  allocations_.push_back({node, demand, {gpus.begin(), gpus.end()}, std::move(milli), true});
  return id;
}

Result<bool> ClusterState::admit(std::size_t node, TaskId id, std::span<const uint32_t> gpus,
                                 const std::vector<uint32_t>& milli) {
  const NodeState& state = nodes_[node];
  auto& agent = agents_[node];
  if (!agent) {
    agent = std::make_unique<model::InstanceRegistry>(
        std::vector<uint64_t>(state.gpu_free_milli.size(), 0), max_instances_per_gpu_);
  }
  // The job's batch step (the umbrella), one instance per GPU, as SPANK asks.
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (milli[i] % kMilliPerUnit != 0) {
      (void)agent->remove(0, id + 1, protocol::kStepBatch, nullptr);
      return Error{"a share of " + std::to_string(milli[i]) +
                   " thousandths is not whole egpu units"};
    }
    model::CreateSpec spec{};
    spec.job_id = id + 1;
    spec.step_id = protocol::kStepBatch;
    spec.gpu = gpus[i];
    spec.uid = 1000;
    spec.gid = 1000;
    spec.units = milli[i] / kMilliPerUnit;
    spec.job_units = spec.units;
    spec.mode = Mode::kBurst;
    spec.umbrella = true;
    const model::Instance* created = nullptr;
    const model::Outcome outcome = agent->create(0, spec, &created);
    if (!outcome.ok()) {
      (void)agent->remove(0, id + 1, protocol::kStepBatch, nullptr);
      return Error{"the egpu agent of " + state.spec->name + " refuses: " + outcome.message};
    }
  }
  return true;
}

void ClusterState::release(TaskId task) {
  Allocation& allocation = allocations_.at(task);
  if (!allocation.live) return;
  allocation.live = false;
  NodeState& state = nodes_[allocation.node];
  if (agent_admission_ && allocation.demand.shares_gpu()) {
    (void)agents_[allocation.node]->remove(0, task + 1, protocol::kStepBatch, nullptr);
  }
  state.cpu_free_milli += allocation.demand.cpu_milli;
  state.memory_free_mib += allocation.demand.memory_mib;
  for (std::size_t i = 0; i < allocation.gpus.size(); ++i) {
    state.gpu_free_milli[allocation.gpus[i]] += allocation.milli[i];
  }
  gpu_allocated_milli_ -= allocation.demand.gpu_demand_milli();
  ++versions_[allocation.node];
}

std::vector<ClusterState::Placed> ClusterState::live() const {
  std::vector<Placed> placed;
  for (const Allocation& allocation : allocations_) {
    if (allocation.live) {
      placed.push_back({allocation.node, &allocation.demand, &allocation.gpus, &allocation.milli});
    }
  }
  return placed;
}

uint32_t ClusterState::agent_allocated_units(std::size_t node, uint32_t gpu) const {
  const auto& agent = agents_.at(node);
  return agent ? agent->allocated_units(gpu) : 0;
}

}  // namespace egpu::clustersim
