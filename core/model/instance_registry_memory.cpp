// InstanceRegistry, memory: one pool per job and GPU shared by the job's
// umbrella and its steps (see the header). Quotas are bytes of device memory.
#include <algorithm>
#include <optional>

#include "core/model/instance_registry.h"

namespace egpu::model {
namespace {

uint64_t add_saturating(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

}  // namespace

const Instance* InstanceRegistry::umbrella_of(uint64_t job_id, uint32_t gpu) const {
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id == job_id && inst.gpu == gpu && inst.umbrella) return &inst;
  }
  return nullptr;
}

uint64_t InstanceRegistry::steps_memory(uint64_t job_id, uint32_t gpu, uint64_t except_id) const {
  uint64_t sum = 0;
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id == job_id && inst.gpu == gpu && !inst.umbrella && id != except_id) {
      sum = add_saturating(sum, inst.mem_quota);
    }
  }
  return sum;
}

Result<uint64_t> InstanceRegistry::step_memory(uint64_t job_id, uint32_t gpu, uint32_t job_units,
                                               uint64_t except_id, uint64_t wanted,
                                               bool explicit_quota,
                                               uint64_t umbrella_mem_used) const {
  const Instance* umbrella = umbrella_of(job_id, gpu);
  const uint64_t gpu_memory = gpu_memory_.at(gpu);
  // The pool: the umbrella's quota, or without one the allocation's share.
  // Unknown when the agent knows no memory size and nobody set a quota.
  std::optional<uint64_t> pool;
  if (umbrella != nullptr && (gpu_memory != 0 || umbrella->mem_quota_explicit)) {
    pool = umbrella->mem_quota;
  } else if (umbrella == nullptr && gpu_memory != 0) {
    pool = gpu_memory / 100 * job_units;
  }
  if (!pool) return wanted;
  const uint64_t others = steps_memory(job_id, gpu, except_id);
  const uint64_t batch = umbrella != nullptr ? umbrella_mem_used : 0;
  const uint64_t held = add_saturating(others, batch);
  const uint64_t room = *pool > held ? *pool - held : 0;
  if (explicit_quota && wanted > room) {
    return Error{"--egpu-mem: job " + std::to_string(job_id) + " has " + std::to_string(*pool) +
                 " bytes of memory on GPU " + std::to_string(gpu) +
                 " for its batch script and steps together; its batch or interactive step holds " +
                 std::to_string(batch) + " and its other steps' quotas " + std::to_string(others) +
                 ", leaving " + std::to_string(room) + ", and the step asks for " +
                 std::to_string(wanted)};
  }
  return std::min(wanted, room);
}

uint64_t InstanceRegistry::memory_limit(const Instance& instance) const {
  if (gpu_memory_.at(instance.gpu) == 0 && !instance.mem_quota_explicit) return kNoMemoryLimit;
  if (!instance.umbrella) return instance.mem_quota;
  const uint64_t steps = steps_memory(instance.job_id, instance.gpu, instance.id);
  return instance.mem_quota > steps ? instance.mem_quota - steps : 0;
}

bool InstanceRegistry::take_step_memory(uint64_t step_id, uint64_t bytes) {
  auto it = instances_.find(step_id);
  if (it == instances_.end() || it->second.umbrella || it->second.mem_quota_explicit) return false;
  it->second.mem_quota -= std::min(bytes, it->second.mem_quota);
  return true;
}

}  // namespace egpu::model
