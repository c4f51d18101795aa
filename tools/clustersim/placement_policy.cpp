#include "tools/clustersim/placement_policy.h"

#include <algorithm>
#include <array>
#include <limits>

namespace egpu::clustersim {
namespace {

struct Named {
  Policy policy;
  std::string_view name;
};
constexpr std::array<Named, 7> kNames = {{{Policy::kWholeGpus, "whole"},
                                          {Policy::kSlurmFirstFit, "first-fit"},
                                          {Policy::kSlurmLeastLoaded, "least-loaded"},
                                          {Policy::kBestFit, "best-fit"},
                                          {Policy::kFgd, "fgd"},
                                          {Policy::kFgdNodeOnly, "fgd-node"},
                                          {Policy::kSlurmFreeUnitsWeight, "weighted"}}};

// Scores closer than this are equal: fragments (thousandths of a GPU times
// popularity) and best-fit's fractions are far coarser, and ties (alike
// nodes) are common and must not be broken by floating-point noise (FGD's
// result on gpushare100 moved by 5 points when they were).
constexpr double kTie = 1e-6;

}  // namespace

std::string_view policy_name(Policy policy) {
  for (const Named& named : kNames) {
    if (named.policy == policy) return named.name;
  }
  return "?";
}

std::optional<Policy> parse_policy(std::string_view name) {
  for (const Named& named : kNames) {
    if (named.name == name) return named.policy;
  }
  return std::nullopt;
}

const std::vector<Policy>& all_policies() {
  static const std::vector<Policy> policies = [] {
    std::vector<Policy> all;
    for (const Named& named : kNames)
      all.push_back(named.policy);
    return all;
  }();
  return policies;
}

PolicyPlacer::PolicyPlacer(Policy policy, const FragmentationMeasure* measure,
                           bool multiple_sharing)
    : policy_(policy), measure_(measure), multiple_sharing_(multiple_sharing) {}

Choice PolicyPlacer::slurm_gpus(const ClusterState& cluster, std::size_t node, const Demand& demand,
                                GpuOrder order) const {
  // A single GPU first (use_single_dev), a split only when none has room.
  if (auto gpus = pick_gpus(cluster.node(node), demand, order))
    return Choice{node, std::move(*gpus), {}};
  auto split = pick_split_share(cluster.node(node), demand, order);
  return Choice{node, std::move(split->gpus), std::move(split->milli)};
}

std::optional<Choice> PolicyPlacer::choose(const ClusterState& cluster, const Demand& demand) {
  switch (policy_) {
    case Policy::kWholeGpus:
    case Policy::kSlurmFirstFit:
    case Policy::kSlurmLeastLoaded: {
      const GpuOrder order =
          policy_ == Policy::kSlurmLeastLoaded ? GpuOrder::kLeastLoaded : GpuOrder::kIndex;
      const auto node = slurm_pick_node(cluster, demand, order, {}, multiple_sharing_);
      if (!node) return std::nullopt;
      return slurm_gpus(cluster, *node, demand, order);
    }
    case Policy::kSlurmFreeUnitsWeight: {
      if (weights_.size() != cluster.node_count()) {
        weights_.assign(cluster.node_count(), 0);
        weight_versions_.assign(cluster.node_count(), UINT64_MAX);
      }
      for (std::size_t i = 0; i < cluster.node_count(); ++i) {
        if (weight_versions_[i] != cluster.version(i)) {
          weights_[i] = free_units_weight(cluster.node(i));
          weight_versions_[i] = cluster.version(i);
        }
      }
      const auto node =
          slurm_pick_node(cluster, demand, GpuOrder::kIndex, weights_, multiple_sharing_);
      if (!node) return std::nullopt;
      return slurm_gpus(cluster, *node, demand, GpuOrder::kIndex);
    }
    case Policy::kBestFit:
      return choose_best_fit(cluster, demand);
    case Policy::kFgd:
    case Policy::kFgdNodeOnly:
      return choose_fgd(cluster, demand);
  }
  return std::nullopt;
}

std::optional<Choice> PolicyPlacer::choose_best_fit(const ClusterState& cluster,
                                                    const Demand& demand) const {
  // What the node has left after the task, CPU and GPU each as a fraction of
  // the node's own, summed with equal weights; the least wins.
  std::optional<Choice> best;
  double best_left = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < cluster.node_count(); ++i) {
    if (!cluster.host_fits(i, demand)) continue;
    const NodeState& node = cluster.node(i);
    auto gpus = pick_gpus(node, demand, GpuOrder::kBestFit);
    if (!gpus) continue;
    double gpu_free = 0;
    for (uint32_t free : node.gpu_free_milli)
      gpu_free += free;
    const double gpu_capacity = static_cast<double>(node.gpu_free_milli.size()) * kMilliPerGpu;
    // host_fits() passed, so the node has CPUs; a node without GPUs counts CPU only.
    const double left =
        static_cast<double>(node.cpu_free_milli - demand.cpu_milli) / node.spec->cpu_milli +
        (gpu_capacity > 0
             ? (gpu_free - static_cast<double>(demand.gpu_demand_milli())) / gpu_capacity
             : 0.0);
    if (left < best_left - kTie) {  // ties: the first node, not rounding noise
      best_left = left;
      best = Choice{i, std::move(*gpus), {}};
    }
  }
  return best;
}

double PolicyPlacer::fragment_now(const ClusterState& cluster, std::size_t node) {
  Cached& cached = cache_[node];
  if (cached.version != cluster.version(node)) {
    const NodeState& state = cluster.node(node);
    cached.fragment = measure_->node_fragment(state.cpu_free_milli, state.gpu_free_milli);
    cached.version = cluster.version(node);
  }
  return cached.fragment;
}

std::optional<Choice> PolicyPlacer::choose_fgd(const ClusterState& cluster, const Demand& demand) {
  if (cache_.size() != cluster.node_count()) cache_.assign(cluster.node_count(), Cached{});
  std::optional<Choice> best;
  double best_growth = std::numeric_limits<double>::infinity();
  std::vector<uint32_t> after;

  for (std::size_t i = 0; i < cluster.node_count(); ++i) {
    if (!cluster.host_fits(i, demand)) continue;
    const NodeState& node = cluster.node(i);
    // Candidate GPU choices: whole GPUs are all alike; for a share, one GPU
    // per distinct free amount that has room (the lowest index of each).
    std::vector<std::vector<uint32_t>> candidates;
    if (policy_ == Policy::kFgdNodeOnly) {
      // The GPU is Slurm's to pick: only its choice is weighed.
      if (auto gpus = pick_gpus(node, demand, GpuOrder::kIndex))
        candidates.push_back(std::move(*gpus));
    } else if (demand.shares_gpu()) {
      for (uint32_t gpu = 0; gpu < node.gpu_free_milli.size(); ++gpu) {
        const uint32_t free = node.gpu_free_milli[gpu];
        if (free < demand.gpu_milli) continue;
        const bool seen = std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) {
          return node.gpu_free_milli[c[0]] == free;
        });
        if (!seen) candidates.push_back({gpu});
      }
    } else if (auto gpus = pick_gpus(node, demand, GpuOrder::kIndex)) {
      candidates.push_back(std::move(*gpus));
    }
    if (candidates.empty()) continue;
    const double before = fragment_now(cluster, i);
    for (auto& gpus : candidates) {
      after = node.gpu_free_milli;
      for (uint32_t gpu : gpus)
        after[gpu] -= demand.gpu_milli;
      const double growth =
          measure_->node_fragment(node.cpu_free_milli - demand.cpu_milli, after) - before;
      if (growth < best_growth - kTie) {  // ties: the first choice
        best_growth = growth;
        best = Choice{i, gpus, {}};
      }
    }
  }
  return best;
}

}  // namespace egpu::clustersim
