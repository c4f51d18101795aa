#include "tools/clustersim/slurm_selection.h"

#include <algorithm>
#include <numeric>

#include "core/model/node_weight.h"
#include "core/protocol/messages.h"

namespace egpu::clustersim {

namespace {

// The order Slurm visits a node's GPUs in for a share.
std::vector<uint32_t> share_visit_order(const std::vector<uint32_t>& free, GpuOrder order) {
  std::vector<uint32_t> visit(free.size());
  std::iota(visit.begin(), visit.end(), 0U);
  if (order == GpuOrder::kLeastLoaded) {
    // Every GPU of a node has the same capacity, so the free ratio orders as the free amount.
    std::stable_sort(visit.begin(), visit.end(),
                     [&](uint32_t a, uint32_t b) { return free[a] > free[b]; });
  } else if (order == GpuOrder::kBestFit) {
    std::stable_sort(visit.begin(), visit.end(),
                     [&](uint32_t a, uint32_t b) { return free[a] < free[b]; });
  }
  return visit;
}

}  // namespace

std::optional<std::vector<uint32_t>> pick_gpus(const NodeState& node, const Demand& demand,
                                               GpuOrder order) {
  const auto& free = node.gpu_free_milli;
  if (demand.gpus == 0) return std::vector<uint32_t>{};
  if (!demand.shares_gpu()) {
    // Whole GPUs: gres/gpu takes untouched ones, in index order.
    std::vector<uint32_t> chosen;
    for (uint32_t gpu = 0; gpu < free.size(); ++gpu) {
      if (free[gpu] == kMilliPerGpu) chosen.push_back(gpu);
      if (chosen.size() == demand.gpus) return chosen;
    }
    return std::nullopt;
  }
  for (uint32_t gpu : share_visit_order(free, order)) {
    if (free[gpu] >= demand.gpu_milli) return std::vector<uint32_t>{gpu};
  }
  return std::nullopt;
}

std::optional<SplitShare> pick_split_share(const NodeState& node, const Demand& demand,
                                           GpuOrder order) {
  if (!demand.shares_gpu()) return std::nullopt;
  const auto& free = node.gpu_free_milli;
  SplitShare split;
  uint32_t needed = demand.gpu_milli;
  for (uint32_t gpu : share_visit_order(free, order)) {
    const uint32_t part = std::min(free[gpu], needed);
    if (part == 0) continue;
    split.gpus.push_back(gpu);
    split.milli.push_back(part);
    needed -= part;
    if (needed == 0) return split;
  }
  return std::nullopt;
}

bool gpus_fit(const NodeState& node, const Demand& demand, GpuOrder order, bool multiple_sharing) {
  return pick_gpus(node, demand, order).has_value() ||
         (multiple_sharing && pick_split_share(node, demand, order).has_value());
}

std::optional<std::size_t> slurm_pick_node(const ClusterState& cluster, const Demand& demand,
                                           GpuOrder order, std::span<const uint64_t> weights,
                                           bool multiple_sharing) {
  auto fits = [&](std::size_t i) {
    return cluster.host_fits(i, demand) &&
           gpus_fit(cluster.node(i), demand, order, multiple_sharing);
  };
  const auto weight = [&](std::size_t i) { return weights.empty() ? 0 : weights[i]; };
  // Only the lightest nodes where the job fits take part.
  uint64_t lightest = UINT64_MAX;
  if (!weights.empty()) {
    for (std::size_t i = 0; i < cluster.node_count(); ++i) {
      if (weights[i] < lightest && fits(i)) lightest = weights[i];
    }
  } else {
    lightest = 0;
  }
  // One pass over the nodes: the best run so far and the best node in the
  // run being built (a run's best node is its fewest-CPU node, the first on a tie).
  std::optional<std::size_t> best_node;
  uint64_t best_run_cpus = 0;
  std::optional<std::size_t> run_node;
  uint64_t run_cpus = 0;
  uint32_t run_node_cpus = 0;
  auto close_run = [&] {
    if (run_node && (!best_node || run_cpus < best_run_cpus)) {
      best_node = run_node;
      best_run_cpus = run_cpus;
    }
    run_node.reset();
    run_cpus = 0;
  };
  for (std::size_t i = 0; i < cluster.node_count(); ++i) {
    const NodeState& node = cluster.node(i);
    if (weight(i) != lightest || !fits(i)) {
      close_run();
      continue;
    }
    const uint32_t cpus = node.cpu_free_milli / 1000;  // avail_cpus counts whole CPUs
    run_cpus += cpus;
    if (!run_node || cpus < run_node_cpus) {
      run_node = i;
      run_node_cpus = cpus;
    }
  }
  close_run();
  return best_node;
}

uint64_t free_units_weight(const NodeState& node) {
  uint64_t free = 0;
  for (uint32_t milli : node.gpu_free_milli)
    free += milli;
  return egpu_packed_node_weight(0, free / (kMilliPerGpu / 100));  // one tier: equal weights
}

}  // namespace egpu::clustersim
