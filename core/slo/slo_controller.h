// SloController: per GPU, moves share from lend instances to latency-critical
// ones while their objective is at risk, and back when it is not (GPUColo's
// two tiers in one loop: with FAA a share change takes effect at the next
// slice, so moving share is already the fast tier).
//
// Called once per period with what each instance did in it (its latency
// samples and device time); returns every instance's share for the next
// period. Rules:
// - Only lend instances give share, down to a floor; guaranteed ones (burst,
//   cap) always keep their units, whatever a latency-critical neighbour says.
//   A lender's share goes to its own job's latency-critical steps first (the
//   common case: an inference step beside the job's training step), then to
//   other jobs': another job's reports (its own to make up) cannot take what
//   the lender's job needs.
// - A latency-critical instance borrows when the objective's percentile over
//   its recent window passes raise_at x target, moving in one step to the
//   share its LatencyModel predicts for aim x target (probing upwards while
//   the model knows too little); it gives back when the percentile stays below
//   return_at x target for calm_periods, or it has no requests for
//   idle_periods. Between the two thresholds nothing moves, and the model aims
//   between them, so a steady load gets a steady share.
// - It borrows only while it waits for the GPU: an instance that did not
//   wait at the gate in its window (as the agent's scheduler measured it,
//   not as its page says) is not held back by its share, and more would not
//   lower its latency; what it borrowed goes back, half per judgement. A
//   reporter that says its requests are slow without waiting gets nothing.
// - After a change it lowers the share, or teaches the model, only from
//   windows measured wholly at the new share; it raises again sooner only
//   while it uses all it is given (saturated: its demand is unknown, and the
//   step is in proportion to how far the latency is off).
// Pure: no clock, no I/O; deterministic for the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "core/slo/latency_histogram.h"
#include "core/slo/latency_model.h"
#include "core/slo/latency_objective.h"

namespace egpu::slo {

enum class SloRole : uint32_t {
  kGuaranteed = 0,       // burst or cap: never lends
  kLend = 1,             // its share may be borrowed while a neighbour's objective is at risk
  kLatencyCritical = 2,  // has an objective
};

struct SloParams {
  // Counts of periods assume the agent's period, 100 ms.
  int window_periods = 5;     // the percentile is read over this many periods
  int settle_periods = 2;     // after a change, periods before judging again
  uint64_t min_samples = 20;  // fewer in the window: too few to judge a percentile
  // A single period that misses the objective with at least this many
  // samples raises at once (the fast tier).
  uint64_t min_fast_samples = 5;
  double raise_at = 0.9;
  double aim = 0.6;
  double return_at = 0.5;
  int calm_periods = 20;
  // Shares are sized for the busiest window in this many periods.
  int demand_periods = 1200;
  int idle_periods = 10;
  uint32_t lend_floor_units = 1;  // a lender keeps this much (FAA needs a share)
  uint32_t probe_min_units = 5;   // least step up while the model cannot say
  // Used >= this x its share: saturated (its demand may be more than it gets).
  double saturated_at = 0.9;
};

struct SloInput {
  uint64_t id = 0;
  // Its Slurm job: a lender's share goes first to its own job's
  // latency-critical steps, and only what they leave to other jobs'.
  uint64_t job = 0;
  SloRole role = SloRole::kGuaranteed;
  uint32_t units = 0;                         // what Slurm granted on this GPU (1..100)
  std::optional<LatencyObjective> objective;  // only for kLatencyCritical
  LatencyHistogram latencies;                 // samples completed this period
  int64_t device_ns = 0;                      // device time used this period
  // Time it waited for the GPU this period (asked for the slice while
  // another held it), as the agent's scheduler measured it.
  int64_t waited_ns = 0;
};

struct SloState {
  uint64_t id = 0;
  SloRole role = SloRole::kGuaranteed;
  uint32_t units = 0;
  uint32_t effective_units = 0;  // what FAA should give it next period
  int32_t borrowed = 0;          // + borrowed (latency-critical), - lent (lend)
  std::optional<LatencyObjective> objective;
  int64_t recent_latency_ns = 0;  // the objective's percentile over the window (0: none)
  uint64_t window_samples = 0;
  uint64_t windows_judged = 0;  // periods whose window had enough samples
  uint64_t windows_met = 0;     // ...and met the objective
  double demand = 0;            // share of the device used, averaged over the window
  double peak_demand = 0;       // the largest such average in the last demand_periods
  std::size_t model_points = 0;
  bool operator==(const SloState&) const = default;
};

class SloController {
 public:
  explicit SloController(SloParams params = {}) : params_(params) {}

  // One period: `inputs` lists every instance on the GPU now (others are
  // forgotten); `period_ns` > 0 is its length. Units over 100 in all are the
  // caller's error and are not checked here beyond keeping shares >= 0.
  const std::vector<SloState>& step(const std::vector<SloInput>& inputs, int64_t period_ns);
  const std::vector<SloState>& states() const { return states_; }
  const SloParams& params() const { return params_; }

  // What the controller remembers of an instance between periods. An agent
  // keeps it across its own restart (memory(), restore()), so a latency-
  // critical instance keeps its loan, its model and its record instead of
  // starting from its granted share and an empty model.
  struct Memory {
    std::deque<LatencyHistogram> window;  // newest last
    std::deque<double> used;              // share used per period (demand_periods), newest last
    LatencyModel model;
    int32_t borrowed = 0;
    int since_change = 0;
    int calm = 0;
    int idle = 0;
    uint64_t windows_judged = 0;
    uint64_t windows_met = 0;
    std::optional<LatencyObjective> objective;
    bool operator==(const Memory&) const = default;
  };
  const std::map<uint64_t, Memory>& memory() const { return tracked_; }
  // Takes back what memory() gave, for an instance the next step() lists
  // (others are forgotten there). Values out of their range (a damaged
  // file) are brought into it: a loan within [0, 100] units, shares used
  // within [0, 1], no more periods than the controller keeps, no more
  // windows met than judged.
  void restore(uint64_t id, Memory memory);

 private:
  // The units a latency-critical instance wants to borrow after this period.
  uint32_t wanted(const SloInput& in, Memory& t, SloState& s);

  SloParams params_;
  std::map<uint64_t, Memory> tracked_;
  // Periods since each latency-critical instance last waited for the GPU.
  // Not kept across an agent's restart: a restored instance starts as one
  // that just waited, a new one as one that has not.
  std::map<uint64_t, int> unwaited_;
  std::vector<SloState> states_;
};

}  // namespace egpu::slo
