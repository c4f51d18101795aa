// What Slurm decides when it places a one-node job, modelled on the code that
// decides it (Slurm 24.11.5; 22.05.8 is the same for these paths), for a job
// asking --gres=egpu:U (a share) or --gres=gpu:N (whole GPUs) and -c CPUs:
//
// GPUs on a node (src/plugins/select/cons_tres/gres_select_filter.c,
// _set_shared_node_bits -> _pick_shared_gres -> _pick_shared_gres_topo): the
// first GPU in index order with enough free units for the whole request
// (use_single_dev). egpu records carry no Cores= (gres/egpu_node.c), so the
// job's sockets do not reorder them. With SelectTypeParameters=LL_SHARED_GRES
// the GPUs are visited least loaded first (_get_sorted_topo_by_least_loaded,
// with qsort: glibc up to 2.36, Debian 12's, sorts stably, so ties keep
// index order; a newer glibc may not). Whole GPUs: the first N free ones in
// index order (the trace has no NVLink topology, and its nodes no Cores= to
// follow); a GPU holding egpu units is not free for gres/gpu (job_submit/egpu
// links the two).
//
// The node (src/plugins/topology/common/eval_nodes.c, _eval_nodes_consec, the
// default without LLN, SPREAD_JOB or pack_serial_at_end): nodes where the job
// fits, in index order, form runs of consecutive nodes (a node where it does
// not fit ends a run); the run with the fewest available CPUs wins (the first
// on a tie), and in it the node with the fewest available CPUs (the first on
// a tie): best fit by CPUs, not by GPUs. Available CPUs of a node are its free
// CPUs. Node weights: cons_tres tests all node sets at once
// (node_scheduler.c calls select_g_job_test once), and _eval_nodes_consec
// ends a run where the weight changes and takes a lighter run over any
// heavier one, so only the lightest nodes where the job fits take part.
// Weights are equal unless given (Weight= in slurm.conf, or `scontrol update
// NodeName=.. Weight=..` at run time): job_test.c also puts the count of
// GPUs near the job's cores in the low byte of each node's sched_weight, the
// same on every node here (egpu is not a sharing GRES and whole-GPU jobs ask
// exactly N).
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

// With SelectTypeParameters=MULTIPLE_SHARING_GRES_PJ (24.11; the shipped
// slurm.conf sets it) a share that no single GPU has room for is split: a
// node qualifies when its GPUs' free units add up to the request
// (gres_sock_list.c), and _set_shared_node_bits' second _pick_shared_gres
// takes what each GPU has, in the same order, until the share is covered.
struct SplitShare {
  std::vector<uint32_t> gpus;
  std::vector<uint32_t> milli;  // the part on each
};
std::optional<SplitShare> pick_split_share(const NodeState& node, const Demand& demand,
                                           GpuOrder order);

// Whether Slurm can give the task GPUs on the node: one GPU with room, or
// with `multiple_sharing` a split.
bool gpus_fit(const NodeState& node, const Demand& demand, GpuOrder order, bool multiple_sharing);

// The node Slurm gives a one-node job (nullopt: none fits now). `weights`:
// one per node, or empty for all equal.
std::optional<std::size_t> slurm_pick_node(const ClusterState& cluster, const Demand& demand,
                                           GpuOrder order, std::span<const uint64_t> weights = {},
                                           bool multiple_sharing = false);

// The weight job_submit/egpu keeps a node at with PackNodes=yes
// (egpu_packed_node_weight, core/model/node_weight.h; one tier: the trace's
// nodes have equal weights): it grows with the node's free GPU capacity in egpu units
// (whole-GPU jobs count as used). Lighter nodes are tried first, so shares
// pack onto the nodes that have least left, node by node.
uint64_t free_units_weight(const NodeState& node);

}  // namespace egpu::clustersim
