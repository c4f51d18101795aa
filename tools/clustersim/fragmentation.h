// FGD's measure of GPU fragmentation (Weng et al., USENIX ATC'23, section 4):
// a node's free GPU capacity that the cluster's typical tasks cannot use,
// weighted by how often each kind of task arrives. For one kind of task m on
// node n, all of n's free GPU capacity is a fragment when m cannot run there
// (too few CPUs left, not enough GPUs with room for it, or m needs no GPU);
// otherwise the free capacity of the GPUs too small for m's per-GPU share is.
// F(n) = sum over kinds m of popularity(m) x fragment(n, m).
//
// The kinds are the distinct (CPU, GPUs, per-GPU share) requests of the
// workload's GPU tasks, each weighted by its count; as in FGD's simulator,
// only the most popular kinds are kept (ten at a time, until they cover
// `popularity_pct` of the tasks; its default is 60) and their weights are
// renormalised. CPU-only tasks count every free GPU as a fragment wherever
// they go, so they cannot change a choice and are left out. Memory is not
// part of the measure, as in the paper. Evaluating F costs O(D x (log K + G)) for D distinct GPU
// requests, K kinds and G GPUs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tools/clustersim/cluster_state.h"

namespace egpu::clustersim {

class FragmentationMeasure {
 public:
  explicit FragmentationMeasure(std::span<const Demand> workload, double popularity_pct = 60);

  std::size_t kinds() const { return kinds_; }

  // F(n) in thousandths of a GPU, for a node with `cpu_free_milli` CPU and
  // these free GPU amounts (any order).
  double node_fragment(uint32_t cpu_free_milli, std::span<const uint32_t> gpu_free_milli) const;

 private:
  // All kinds with one GPU request, by CPU: weight of those asking <= a CPU amount.
  struct GpuRequest {
    uint32_t gpus;
    uint32_t gpu_milli;
    std::vector<uint32_t> cpu_milli;  // ascending
    std::vector<double> weight_upto;  // weight_upto[i]: kinds with cpu <= cpu_milli[i]
    double weight = 0;                // all its kinds
  };
  std::vector<GpuRequest> requests_;
  std::size_t kinds_ = 0;
};

}  // namespace egpu::clustersim
