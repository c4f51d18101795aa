#include "nodeagent/latency_control.h"

#include <cmath>
#include <vector>

namespace egpu::agent {
namespace {

const std::map<uint64_t, int32_t> kNoLoans;

slo::SloRole role_of(const model::Instance& inst) {
  if (inst.latency_critical()) return slo::SloRole::kLatencyCritical;
  return inst.mode == Mode::kLend ? slo::SloRole::kLend : slo::SloRole::kGuaranteed;
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
  PerGpu& g = gpus_[gpu];
  std::vector<slo::SloInput> inputs;
  std::map<uint64_t, Seen> seen;
  for (const model::Instance* inst : registry.on_gpu(gpu)) {
    const InstanceRuntime* rt = arbiter.runtime(inst->id);
    if (rt == nullptr) continue;
    slo::SloInput in;
    in.id = inst->id;
    in.role = role_of(*inst);
    in.units = static_cast<uint32_t>(std::lround(registry.effective_share(*inst) * 100.0));
    if (in.role == slo::SloRole::kLatencyCritical) in.objective = inst->objective;
    Seen now{rt->latency_counts(), rt->device_ns_total()};
    // What it did since the last period; nothing for one seen the first time.
    if (auto before = g.seen.find(inst->id); before != g.seen.end()) {
      in.latencies = slo::LatencyHistogram::delta(now.counts, before->second.counts);
      in.device_ns = static_cast<int64_t>(now.device_ns - before->second.device_ns);
    }
    seen[inst->id] = now;
    inputs.push_back(std::move(in));
  }
  g.seen = std::move(seen);
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

void LatencyControl::forget(uint32_t gpu) {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end()) return;
  for (const auto& [id, seen] : it->second.seen)
    states_.erase(id);
  gpus_.erase(it);
}

const slo::SloState* LatencyControl::state(uint64_t instance_id) const {
  auto it = states_.find(instance_id);
  return it == states_.end() ? nullptr : &it->second;
}

}  // namespace egpu::agent
