// Gangs on this node: a step's instances on several GPUs hold their slices
// together (core/model/gang_plan.h plans them, core/faa the windows).
#include <sys/types.h>

#include <algorithm>

#include "core/util/log.h"
#include "nodeagent/agent.h"
#include "nodeagent/clock_quality.h"

namespace egpu::agent {

void Agent::apply_gangs() {
  const faa::Nanos period = static_cast<faa::Nanos>(config_.gang_period_ms) * faa::kMillisecond;
  model::GangPlan plan;
  if (period > 0) {
    // Shares without the latency control's loans: a loan changes a rank's
    // FAA target for a while, not the gang's windows on every GPU.
    std::map<uint64_t, double> shares;
    for (uint32_t gpu = 0; gpu < arbiters_.size(); ++gpu)
      for (const auto& [id, target] : registry_->faa_targets(gpu))
        shares[id] = target.first;
    // A multi-node step's windows open with its other nodes' only as far as
    // the clocks agree; past the tolerance it is a gang of its GPUs here.
    plan = model::plan_gangs(registry_->all(), shares, period, clock_alignment().ok());
    // Windows open at wall-clock multiples of the period: the same instants
    // on every node whose clock is synchronized.
    const faa::Nanos epoch = wall_aligned_epoch(period);
    for (auto& [id, window] : plan.windows)
      window.epoch = epoch;
  }
  for (const auto& key : plan.unplaced) {
    const bool known =
        std::find(gangs_.unplaced.begin(), gangs_.unplaced.end(), key) != gangs_.unplaced.end();
    if (!known) {
      EGPU_LOG_WARN(
          "job %llu step %u: its GPUs' gang windows do not fit beside the others; "
          "its instances are sliced on their own",
          static_cast<unsigned long long>(key.first), key.second);
    }
  }
  for (const auto& arb : arbiters_) {
    std::map<uint64_t, faa::GangWindow> mine;
    for (const model::Instance* inst : registry_->on_gpu(arb->gpu())) {
      const auto w = plan.windows.find(inst->id);
      if (w != plan.windows.end()) mine.emplace(inst->id, w->second);
    }
    arb->set_gang_windows(mine);
  }
  gangs_ = std::move(plan);
}

faa::ClockQuality Agent::clock() const {
  // A clock the nodes share agrees with theirs whatever its discipline says.
  if (config_.gang_clock == config::GangClock::kShared) return {true, 0};
  return read_clock_quality();
}

Status Agent::clock_alignment() const {
  return faa::can_align_across_nodes(clock(), faa::kDefaultAlignTolerance);
}

}  // namespace egpu::agent
