// LatencyControl: the agent's side of latency objectives. Every period it
// reads, for each GPU with a latency-critical instance, what each instance
// did (its device time, and the latency counts of its step's instances on
// every GPU of the node, from their pages), runs the GPU's
// SloController (core/slo) and keeps the loans it decided; the agent applies
// them to FAA through InstanceRegistry::faa_targets. Thin: the policy is in
// core, this is the scan.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "core/model/instance_registry.h"
#include "core/slo/slo_controller.h"
#include "core/slo/slo_memory_codec.h"
#include "nodeagent/gpu_arbiter.h"

namespace egpu::agent {

class LatencyControl {
 public:
  static constexpr int64_t kPeriodNs = 100'000'000;  // SloParams count periods of this

  // Whether a GPU needs control: an instance on it has an objective, or a
  // loan is still out.
  bool wanted(uint32_t gpu, const model::InstanceRegistry& registry) const;
  // Where an instance's page is read from (its GPU's arbiter); nullptr when
  // it has none.
  using RuntimeOf = std::function<const InstanceRuntime*(const model::Instance&)>;
  // The time an instance has waited for the GPU so far, as its arbiter's
  // scheduler measured it (cumulative, ns).
  using WaitedOf = std::function<uint64_t(const model::Instance&)>;
  // One period of `period_ns` for a GPU; true when its loans changed.
  bool step(uint32_t gpu, const model::InstanceRegistry& registry, const RuntimeOf& runtime_of,
            const WaitedOf& waited_of, int64_t period_ns);
  // The same where only this GPU's pages are read (a one-GPU node).
  bool step(uint32_t gpu, const model::InstanceRegistry& registry, const GpuArbiter& arbiter,
            int64_t period_ns);
  // The GPU needs no control now: everything about it is forgotten, so the
  // first period after a gap starts from fresh readings (an old baseline
  // would pass hours of device time and stale samples off as one period).
  // True when there was something to forget.
  bool forget(uint32_t gpu);
  // Units moved on a GPU: + borrowed, - lent, by instance id.
  const std::map<uint64_t, int32_t>& loans(uint32_t gpu) const;
  // The controller's last view of an instance (status, metrics); nullptr if
  // it has none.
  const slo::SloState* state(uint64_t instance_id) const;

  // What a GPU's control would need to go on after an agent restart (its
  // loans, what its controller remembers), and taking it back in a new
  // agent. The time the agent was away counts as a change of share: the
  // controller judges afresh from the next window, but the loans, the model
  // and the record stand meanwhile. Only instances on this GPU are taken:
  // loans that a lend instance gives or a latency-critical one takes, and
  // memories of latency-critical instances whose objective is unchanged
  // (faa_targets checks the loans again as it applies them).
  slo::SloMemory memory(uint32_t gpu) const;
  void restore(uint32_t gpu, const slo::SloMemory& memory, const model::InstanceRegistry& registry);
  // Periods since memory(gpu) was last marked saved; the agent saves a GPU's
  // memory when its loans change and every so many periods.
  int periods_unsaved(uint32_t gpu) const;
  void mark_saved(uint32_t gpu);

 private:
  struct Seen {
    // A latency-critical instance's: the latency counts of each member of
    // its objective group (see objective_group), by instance id.
    std::map<uint64_t, slo::LatencyHistogram::Counts> counts;
    uint64_t device_ns = 0;
    uint64_t waited_ns = 0;
  };
  struct PerGpu {
    slo::SloController controller;
    std::map<uint64_t, Seen> seen;  // by instance id
    std::map<uint64_t, int32_t> loans;
    int periods_unsaved = 0;
  };

  std::map<uint32_t, PerGpu> gpus_;
  std::map<uint64_t, slo::SloState> states_;  // by instance id
};

}  // namespace egpu::agent
