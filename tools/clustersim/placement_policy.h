// Where a task goes, by policy: the ones Slurm can be told to use (what egpu
// gets today: Slurm's node choice with first-fit or least-loaded GPUs; whole
// GPUs for every task), and two that Slurm cannot, from the FGD paper: its
// best-fit baseline and fragmentation gradient descent.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tools/clustersim/cluster_state.h"
#include "tools/clustersim/fragmentation.h"
#include "tools/clustersim/slurm_selection.h"

namespace egpu::clustersim {

enum class Policy {
  kWholeGpus,         // Slurm, every GPU task rounded up to whole GPUs (gres/gpu)
  kSlurmFirstFit,     // Slurm, shares as egpu units: egpu today
  kSlurmLeastLoaded,  // the same with SelectTypeParameters=LL_SHARED_GRES
  kBestFit,           // FGD's baseline: the node left with the least, then the tightest GPU
  kFgd,               // FGD: the placement that adds the least fragmentation
  // What a slurmctld plugin could do (job_submit/egpu pinning the job to a
  // node): FGD picks the node, Slurm still picks the GPU on it (first fit).
  kFgdNodeOnly,
  // Slurm with each node's Weight kept at its free egpu units
  // (free_units_weight), as `scontrol update` or a slurmctld plugin can.
  kSlurmFreeUnitsWeight,
};

std::string_view policy_name(Policy policy);
std::optional<Policy> parse_policy(std::string_view name);
const std::vector<Policy>& all_policies();

struct Choice {
  std::size_t node;
  std::vector<uint32_t> gpus;
  std::vector<uint32_t> split;  // a share split over `gpus`: the parts; empty: not split
};

class PolicyPlacer {
 public:
  // `measure` is needed by the FGD policies only and must outlive the
  // placer. `multiple_sharing`: Slurm's MULTIPLE_SHARING_GRES_PJ (the Slurm
  // policies may split a share over GPUs). One placer per ClusterState: it
  // caches per node.
  PolicyPlacer(Policy policy, const FragmentationMeasure* measure, bool multiple_sharing = false);

  Policy policy() const { return policy_; }
  // Whether the policy turns every share into a whole GPU.
  bool whole_gpus() const { return policy_ == Policy::kWholeGpus; }
  // nullopt: the task fits nowhere now.
  std::optional<Choice> choose(const ClusterState& cluster, const Demand& demand);

 private:
  std::optional<Choice> choose_best_fit(const ClusterState& cluster, const Demand& demand) const;
  std::optional<Choice> choose_fgd(const ClusterState& cluster, const Demand& demand);
  double fragment_now(const ClusterState& cluster, std::size_t node);

  // Slurm's choice of GPUs on the node it picked.
  Choice slurm_gpus(const ClusterState& cluster, std::size_t node, const Demand& demand,
                    GpuOrder order) const;

  Policy policy_;
  const FragmentationMeasure* measure_;
  bool multiple_sharing_;
  // F(n) as of a node version (FGD).
  struct Cached {
    uint64_t version = UINT64_MAX;
    double fragment = 0;
  };
  std::vector<Cached> cache_;
  std::vector<uint64_t> weights_;  // kSlurmFreeUnitsWeight, by node version
  std::vector<uint64_t> weight_versions_;
};

}  // namespace egpu::clustersim
