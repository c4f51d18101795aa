// A data-parallel step (ddp-like, one rank per GPU, all-reduce per
// iteration) on two simulated GPUs beside greedy co-tenants, with the real
// agent and shim: its iteration rate sliced as a gang or independently, and
// what its co-tenants get. One scenario for the gang test (which asserts on
// it) and scripts/bench --only gang (which reports it).
#pragma once

#include <chrono>
#include <cstdint>

namespace egpu::integration {

struct GangSetup {
  bool gang = true;          // GangPeriodMs=20, else 0 (the default): independent
  uint32_t rank_units = 50;  // each rank's share of its GPU
  bool cotenants = true;     // a greedy job on each GPU with the rest
  std::chrono::milliseconds warmup{1500};
  std::chrono::milliseconds measure{6000};
};

struct GangRun {
  double iterations_per_s = 0;  // rank 0's rate over the measurement
  // The co-tenants' worst 500 ms window below their target, both GPUs, in
  // percentage points of wall time (0 without co-tenants).
  double cotenant_worst_window_pp = 0;
  double cotenant_share = 0;  // the lower of the two co-tenants' whole-run shares
  bool ok = false;            // the run produced figures (harness failures are reported)
};

GangRun run_gang_step(const GangSetup& setup);

// The rank's iteration rate alone on two whole GPUs (the reference its share
// scales), then `shared` as a fraction of that times the share.
double gang_iteration_ratio(const GangRun& shared, const GangRun& alone, uint32_t rank_units);

}  // namespace egpu::integration
