// What latency-sensitive (LS) tasks get when they share a GPU with
// best-effort (BE) ones, every task busy all the time (the worst case for a
// shared GPU): under egpu, FAA from core (the real SliceScheduler, driven in
// simulated time by tests/unit/faa/sim), against the plain time-slicing of
// Slurm's gres/shard, which enforces nothing (the driver gives each busy
// context an equal turn, so each of n tasks gets 1/n whatever it asked).
// Achieved share over asked share, per task, on every GPU of a cluster state
// that holds at least one LS and one BE share.
#pragma once

#include <cstdint>

#include "tools/clustersim/cluster_state.h"

namespace egpu::clustersim {

struct ShareOutcome {
  uint64_t tasks = 0;
  double mean_ratio = 0;  // achieved / asked
  double min_ratio = 0;
  double below_95_pct = 0;  // percent of tasks with achieved < 0.95 x asked
};

struct ColocationShares {
  uint64_t gpus = 0;  // GPUs with LS and BE shares together
  ShareOutcome ls_faa, ls_time_slicing, be_faa, be_time_slicing;
};

ColocationShares colocation_shares(const ClusterState& cluster);

}  // namespace egpu::clustersim
