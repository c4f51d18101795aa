#include "core/shm/slot_control_io.h"

#include "core/protocol/messages.h"
#include "core/slo/latency_objective.h"
#include "core/util/mode.h"

namespace egpu::shm {

void write_slot_control(SlotRecord& c, SlotGrant& grant, const model::Instance& inst) {
  c.mem_quota.store(inst.mem_quota, std::memory_order_relaxed);
  c.job_id.store(inst.job_id, std::memory_order_relaxed);
  c.step_id.store(inst.step_id, std::memory_order_relaxed);
  c.units.store(inst.units, std::memory_order_relaxed);
  c.job_units.store(inst.job_units, std::memory_order_relaxed);
  c.granted_units.store(inst.granted_units, std::memory_order_relaxed);
  c.mode.store(mode_value(inst.mode), std::memory_order_relaxed);
  c.uid.store(inst.uid, std::memory_order_relaxed);
  c.gid.store(inst.gid, std::memory_order_relaxed);
  c.flags.store((inst.umbrella ? protocol::kCreateUmbrella : 0) |
                    (inst.spans_nodes ? protocol::kCreateSpansNodes : 0) |
                    (inst.mem_quota_explicit ? kSlotQuotaExplicit : 0),
                std::memory_order_relaxed);
  c.creator_pid.store(inst.creator.pid, std::memory_order_relaxed);
  c.creator_start.store(inst.creator.start, std::memory_order_relaxed);
  c.slo_percentile_milli.store(inst.objective ? inst.objective->percentile_milli : 0,
                               std::memory_order_relaxed);
  c.slo_target_ns.store(inst.objective ? inst.objective->target_ns : 0, std::memory_order_relaxed);
  c.instance_id.store(inst.id, std::memory_order_release);
  c.state.store(static_cast<uint32_t>(SlotState::kActive), std::memory_order_release);
  grant.units.store(inst.units, std::memory_order_relaxed);
  grant.instance_id.store(inst.id, std::memory_order_release);
}

void free_slot_control(SlotRecord& c, SlotGrant& grant) {
  grant.instance_id.store(0, std::memory_order_release);
  c.state.store(static_cast<uint32_t>(SlotState::kFree), std::memory_order_release);
  c.instance_id.store(0, std::memory_order_release);
}

Result<std::optional<RecoveredSlot>> read_slot_control(const SlotRecord& c, uint32_t gpu,
                                                       uint32_t slot) {
  if (c.state.load() != static_cast<uint32_t>(SlotState::kActive)) {
    return std::optional<RecoveredSlot>{};
  }
  const uint32_t mode = c.mode.load();
  if (!mode_from_value(mode)) {
    return Error{"GPU " + std::to_string(gpu) + " slot " + std::to_string(slot) + ": mode " +
                 std::to_string(mode) + " is not burst, cap or lend; instance " +
                 std::to_string(c.instance_id.load()) + " not recovered"};
  }
  RecoveredSlot r;
  model::Instance& inst = r.instance;
  inst.id = c.instance_id.load();
  inst.job_id = c.job_id.load();
  inst.step_id = c.step_id.load();
  inst.gpu = gpu;
  inst.slot = slot;
  inst.uid = c.uid.load();
  inst.gid = c.gid.load();
  inst.units = c.units.load();
  inst.job_units = c.job_units.load();
  inst.granted_units = c.granted_units.load();
  inst.mode = *mode_from_value(mode);
  inst.mem_quota = c.mem_quota.load();
  inst.umbrella = (c.flags.load() & protocol::kCreateUmbrella) != 0;
  inst.spans_nodes = !inst.umbrella && (c.flags.load() & protocol::kCreateSpansNodes) != 0;
  inst.mem_quota_explicit = (c.flags.load() & kSlotQuotaExplicit) != 0;
  inst.creator = {c.creator_pid.load(), c.creator_start.load()};
  const uint32_t percentile = c.slo_percentile_milli.load();
  const int64_t target = c.slo_target_ns.load();
  if (percentile == 0 && target == 0) return std::optional<RecoveredSlot>{std::move(r)};
  if (percentile == 0 || percentile >= 100'000 || target < slo::kMinTargetNs ||
      target > slo::kMaxTargetNs) {
    r.warning = "GPU " + std::to_string(gpu) + " slot " + std::to_string(slot) +
                ": latency objective p" + std::to_string(percentile) + "/1000 " +
                std::to_string(target) + " ns is out of range; dropped";
  } else {
    inst.objective = slo::LatencyObjective{percentile, target};
  }
  return std::optional<RecoveredSlot>{std::move(r)};
}

}  // namespace egpu::shm
