// What Slurm decides when it places a one-node job, modelled on the code that
// decides it (Slurm 24.11.5; 22.05.8 is the same for these paths), for a job
// asking --gres=egpu:U (a share) or --gres=gpu:N (whole GPUs) and -c CPUs:
//
// GPUs on a node (src/plugins/select/cons_tres/gres_select_filter.c,
// _set_shared_node_bits -> _pick_shared_gres -> _pick_shared_gres_topo): the
// first GPU in index order with enough free units for the whole request
// (use_single_dev); with SelectTypeParameters=LL_SHARED_GRES the GPUs are
// visited least loaded first (_get_sorted_topo_by_least_loaded; qsort, not
// stable: ties here keep index order). Whole GPUs: the first N free ones in
// index order (the trace has no NVLink topology to sort by); a GPU holding
// egpu units is not free for gres/gpu (job_submit/egpu links the two).
//
// The node (src/plugins/topology/common/eval_nodes.c, _eval_nodes_consec, the
// default without LLN, SPREAD_JOB or pack_serial_at_end, all node weights
// equal): nodes where the job fits, in index order, form runs of consecutive
// nodes (a node where it does not fit ends a run); the run with the fewest
// available CPUs wins (the first on a tie), and in it the node with the
// fewest available CPUs (the first on a tie): best fit by CPUs, not by GPUs.
// Available CPUs of a node are its free CPUs. With node weights (Weight= in
// slurm.conf, or `scontrol update NodeName=.. Weight=..` at run time) only
// the nodes of the lowest weight where the job fits take part (node sets are
// tried in weight order, node_scheduler.c _pick_best_nodes, and a weight
// change ends a run in _eval_nodes_consec).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tools/clustersim/cluster_state.h"

namespace egpu::clustersim {

enum class GpuOrder {
  kIndex,        // Slurm's default: first fit by GPU index
  kLeastLoaded,  // SelectTypeParameters=LL_SHARED_GRES
  kBestFit,      // the GPU left with the least free (not a Slurm option)
};

// The GPUs the task gets on this node's free GPUs; nullopt when it cannot
// have them there. Empty for a CPU-only task.
std::optional<std::vector<uint32_t>> pick_gpus(const NodeState& node, const Demand& demand,
                                               GpuOrder order);

// The node Slurm gives a one-node job (nullopt: none fits now). `weights`:
// one per node, or empty for all equal.
std::optional<std::size_t> slurm_pick_node(const ClusterState& cluster, const Demand& demand,
                                           GpuOrder order, std::span<const uint64_t> weights = {});

// A node weight an admin or a plugin can keep up to date: the node's free
// GPU capacity in egpu units (whole-GPU jobs count as used), plus one.
// Lighter nodes are tried first, so shares pack onto the nodes that have
// least left, node by node.
uint64_t free_units_weight(const NodeState& node);

}  // namespace egpu::clustersim
