#include "core/model/gang_plan.h"

#include <algorithm>

namespace egpu::model {

GangPlan plan_gangs(const std::vector<const Instance*>& instances,
                    const std::map<uint64_t, double>& shares, faa::Nanos period,
                    bool align_across_nodes, const GangPlan& previous) {
  // Steps in (job, step) order, multi-node ones first (see the header).
  using StepKey = std::pair<uint64_t, uint32_t>;
  std::map<std::pair<bool, StepKey>, std::vector<const Instance*>> steps;
  for (const Instance* inst : instances) {
    if (inst->umbrella) continue;
    const bool across = align_across_nodes && inst->spans_nodes;
    steps[{!across, {inst->job_id, inst->step_id}}].push_back(inst);
  }
  std::vector<faa::GangRequest> requests;
  std::vector<const std::vector<const Instance*>*> members;
  for (const auto& [key, insts] : steps) {
    const bool across = !key.first;
    if (insts.size() < (across ? 1u : 2u)) continue;
    double share = 1.0;
    faa::GangRequest r;
    for (const Instance* inst : insts) {
      const auto s = shares.find(inst->id);
      share = std::min(share, s == shares.end() ? 0.0 : s->second);
      r.gpus.push_back(inst->gpu);
    }
    if (share <= 0.0) continue;
    r.length = faa::window_length(share, period);
    if (across && previous.period == period) {
      const auto kept = previous.across_offsets.find(key.second);
      if (kept != previous.across_offsets.end()) r.keep = kept->second;
    }
    requests.push_back(std::move(r));
    members.push_back(&insts);
  }
  GangPlan plan;
  plan.period = period;
  const auto offsets = faa::place_gangs(requests, period);
  for (std::size_t g = 0; g < requests.size(); ++g) {
    const auto& insts = *members[g];
    if (!offsets[g]) {
      plan.unplaced.emplace_back(insts.front()->job_id, insts.front()->step_id);
      continue;
    }
    const bool across = align_across_nodes && insts.front()->spans_nodes;
    for (const Instance* inst : insts) {
      plan.windows[inst->id] =
          faa::GangWindow{0, period, *offsets[g], requests[g].length, insts.front()->id, across};
    }
    if (across) plan.across_offsets[{insts.front()->job_id, insts.front()->step_id}] = *offsets[g];
  }
  if (!align_across_nodes && previous.period == period) {
    // Not placed across nodes while the clock disagrees, but remembered:
    // their other nodes keep those offsets, and once the clock agrees again
    // the steps go back to them rather than to a fresh (job, step) order.
    for (const Instance* inst : instances) {
      const StepKey key{inst->job_id, inst->step_id};
      const auto kept = previous.across_offsets.find(key);
      if (inst->spans_nodes && !inst->umbrella && kept != previous.across_offsets.end())
        plan.across_offsets.insert(*kept);
    }
  }
  return plan;
}

}  // namespace egpu::model
