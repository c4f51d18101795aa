#include "nodeagent/latency_control.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace egpu::agent {
namespace {

const std::map<uint64_t, int32_t> kNoLoans;

slo::SloRole role_of(const model::Instance& inst) {
  if (inst.latency_critical()) return slo::SloRole::kLatencyCritical;
  return inst.mode == Mode::kLend ? slo::SloRole::kLend : slo::SloRole::kGuaranteed;
}

// The instances whose requests judge `inst`'s objective: the latency-
// critical instances of its step on this node with the same objective,
// by id. A step on several GPUs serves a request with all of them, and a
// server reports its latency through one (egpu_report_latency goes to the
// calling thread's device), so each GPU's controller judges the step's
// requests, not only those its own instance happened to see.
std::vector<const model::Instance*> objective_group(const model::Instance& inst,
                                                    const model::InstanceRegistry& registry) {
  std::vector<const model::Instance*> group;
  for (const model::Instance* other : registry.all()) {
    if (other->job_id == inst.job_id && other->step_id == inst.step_id &&
        other->latency_critical() && other->objective == inst.objective)
      group.push_back(other);
  }
  std::sort(group.begin(), group.end(),
            [](const model::Instance* a, const model::Instance* b) { return a->id < b->id; });
  return group;
}

}  // namespace

bool LatencyControl::wanted(uint32_t gpu, const model::InstanceRegistry& registry) const {
  if (!loans(gpu).empty()) return true;
  for (const model::Instance* inst : registry.on_gpu(gpu)) {
    if (role_of(*inst) == slo::SloRole::kLatencyCritical) return true;
  }
  return false;
}

bool LatencyControl::step(uint32_t gpu, const model::InstanceRegistry& registry,
                          const GpuArbiter& arbiter, int64_t period_ns) {
  return step(
      gpu, registry,
      [&](const model::Instance& inst) {
        return inst.gpu == gpu ? arbiter.runtime(inst.id) : nullptr;
      },
      [&](const model::Instance& inst) { return arbiter.waited_ns(inst.id); }, period_ns);
}

bool LatencyControl::step(uint32_t gpu, const model::InstanceRegistry& registry,
                          const RuntimeOf& runtime_of, const WaitedOf& waited_of,
                          int64_t period_ns) {
  PerGpu& g = gpus_[gpu];
  std::vector<slo::SloInput> inputs;
  std::map<uint64_t, Seen> seen;
  for (const model::Instance* inst : registry.on_gpu(gpu)) {
    const InstanceRuntime* rt = runtime_of(*inst);
    if (rt == nullptr) continue;
    slo::SloInput in;
    in.id = inst->id;
    in.job = inst->job_id;
    in.role = role_of(*inst);
    in.units = static_cast<uint32_t>(std::lround(registry.effective_share(*inst) * 100.0));
    Seen now;
    now.device_ns = rt->device_ns_total();
    now.waited_ns = waited_of(*inst);
    if (in.role == slo::SloRole::kLatencyCritical) {
      in.objective = inst->objective;
      for (const model::Instance* member : objective_group(*inst, registry)) {
        if (const InstanceRuntime* m = runtime_of(*member))
          now.counts[member->id] = m->latency_counts();
      }
    }
    // What it did since the last period: each member's samples since it
    // was last read (one reset or replaced is read afresh, by delta's rule);
    // nothing for an instance, or a member, seen the first time.
    if (auto before = g.seen.find(inst->id); before != g.seen.end()) {
      for (const auto& [id, counts] : now.counts) {
        if (auto was = before->second.counts.find(id); was != before->second.counts.end())
          in.latencies.add(slo::LatencyHistogram::delta(counts, was->second));
      }
      in.device_ns = static_cast<int64_t>(now.device_ns - before->second.device_ns);
      in.waited_ns = now.waited_ns > before->second.waited_ns
                         ? static_cast<int64_t>(now.waited_ns - before->second.waited_ns)
                         : 0;
    }
    seen[inst->id] = std::move(now);
    inputs.push_back(std::move(in));
  }
  // The first period of a GPU (a new agent, or control starting) has no
  // baseline: what its instances did in it is unknown, not nothing.
  const bool first = g.seen.empty() && !seen.empty();
  g.seen = std::move(seen);
  g.periods_unsaved = std::min(g.periods_unsaved + 1, 1 << 30);
  if (first) return false;
  std::map<uint64_t, int32_t> loans;
  for (const slo::SloState& s : g.controller.step(inputs, period_ns)) {
    if (s.borrowed != 0) loans[s.id] = s.borrowed;
    if (s.role == slo::SloRole::kGuaranteed && !s.objective) {
      states_.erase(s.id);
    } else {
      states_[s.id] = s;
    }
  }
  std::erase_if(states_, [&](const auto& kv) { return registry.find(kv.first) == nullptr; });
  const bool changed = loans != g.loans;
  g.loans = std::move(loans);
  return changed;
}

const std::map<uint64_t, int32_t>& LatencyControl::loans(uint32_t gpu) const {
  auto it = gpus_.find(gpu);
  return it == gpus_.end() ? kNoLoans : it->second.loans;
}

bool LatencyControl::forget(uint32_t gpu) {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end()) return false;
  for (const auto& [id, seen] : it->second.seen)
    states_.erase(id);
  for (const auto& [id, units] : it->second.loans)
    states_.erase(id);
  for (const auto& [id, memory] : it->second.controller.memory())
    states_.erase(id);
  gpus_.erase(it);
  return true;
}

slo::SloMemory LatencyControl::memory(uint32_t gpu) const {
  slo::SloMemory out;
  const auto it = gpus_.find(gpu);
  if (it == gpus_.end()) return out;
  out.loans = it->second.loans;
  for (const auto& [id, m] : it->second.controller.memory()) {
    if (m.objective) out.instances[id] = m;  // others remember nothing
  }
  return out;
}

void LatencyControl::restore(uint32_t gpu, const slo::SloMemory& memory,
                             const model::InstanceRegistry& registry) {
  forget(gpu);
  PerGpu& g = gpus_[gpu];
  const auto here = [&](uint64_t id) {
    const model::Instance* inst = registry.find(id);
    return inst != nullptr && inst->gpu == gpu ? inst : nullptr;
  };
  // Only a lender lends and only a latency-critical instance borrows (as
  // faa_targets holds them to).
  for (const auto& [id, units] : memory.loans) {
    const model::Instance* inst = here(id);
    if (inst == nullptr) continue;
    const slo::SloRole role = role_of(*inst);
    if ((units < 0 && role == slo::SloRole::kLend) ||
        (units > 0 && role == slo::SloRole::kLatencyCritical))
      g.loans[id] = units;
  }
  for (auto [id, m] : memory.instances) {
    const model::Instance* inst = here(id);
    if (inst == nullptr || !inst->latency_critical() || m.objective != inst->objective) continue;
    m.since_change = 0;
    m.calm = 0;
    m.idle = 0;
    m.window.clear();
    g.controller.restore(id, std::move(m));
  }
  // What status and metrics show until the first period: the loans as they
  // were, and each instance's record.
  for (const auto& [id, units] : g.loans) {
    const model::Instance* inst = here(id);
    slo::SloState s;
    s.id = id;
    s.role = role_of(*inst);
    s.units = static_cast<uint32_t>(std::lround(registry.effective_share(*inst) * 100.0));
    s.borrowed = units;
    states_[id] = s;
  }
  for (const auto& [id, m] : g.controller.memory()) {
    slo::SloState& s = states_[id];
    s.id = id;
    s.role = slo::SloRole::kLatencyCritical;
    s.units = static_cast<uint32_t>(std::lround(registry.effective_share(*here(id)) * 100.0));
    s.objective = m.objective;
    s.windows_judged = m.windows_judged;
    s.windows_met = m.windows_met;
    s.model_points = m.model.points();
  }
  for (auto& [id, s] : states_) {
    if (here(id) != nullptr)
      s.effective_units =
          static_cast<uint32_t>(std::max(0, static_cast<int32_t>(s.units) + s.borrowed));
  }
}

int LatencyControl::periods_unsaved(uint32_t gpu) const {
  const auto it = gpus_.find(gpu);
  return it == gpus_.end() ? 0 : it->second.periods_unsaved;
}

void LatencyControl::mark_saved(uint32_t gpu) {
  if (auto it = gpus_.find(gpu); it != gpus_.end()) it->second.periods_unsaved = 0;
}

const slo::SloState* LatencyControl::state(uint64_t instance_id) const {
  auto it = states_.find(instance_id);
  return it == states_.end() ? nullptr : &it->second;
}

}  // namespace egpu::agent
