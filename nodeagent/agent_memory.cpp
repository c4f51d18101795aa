// Agent: one memory pool per job and GPU (InstanceRegistry). The registry
// decides the quotas; this publishes them and closes the race with an
// umbrella that allocates while a step of its job starts.
#include "core/util/log.h"
#include "nodeagent/agent.h"

namespace egpu::agent {

static_assert(model::kNoMemoryLimit == shm::kNoMemLimit);

uint64_t Agent::umbrella_memory_used(uint64_t job_id, uint32_t gpu) const {
  const model::Instance* umbrella = registry_->umbrella_of(job_id, gpu);
  return umbrella != nullptr ? arbiters_[gpu]->memory_used(umbrella->id) : 0;
}

void Agent::publish_memory(uint32_t gpu) {
  for (const model::Instance* inst : registry_->on_gpu(gpu))
    arbiters_[gpu]->publish_memory_limit(inst->id, registry_->memory_limit(*inst));
}

bool Agent::settle_job_memory(uint32_t gpu, uint64_t step_instance_id, uid_t by) {
  const model::Instance* step = registry_->find(step_instance_id);
  if (step == nullptr) return true;
  const model::Instance* umbrella = registry_->umbrella_of(step->job_id, gpu);
  if (umbrella == nullptr) return true;
  // The new limits are published: from here on the umbrella's shims see
  // them, and what they added before shows in this read (core/quota).
  const uint64_t used = arbiters_[gpu]->memory_used(umbrella->id);
  const uint64_t limit = registry_->memory_limit(*umbrella);
  if (used <= limit) return true;
  const uint64_t job_id = step->job_id;
  const uint64_t quota_before = step->mem_quota;
  if (!registry_->take_step_memory(step_instance_id, used - limit)) return false;
  // A quota already taken down stays where it is: a resize repeated by its
  // owner logs nothing more (and what it does log is budgeted per uid).
  const uint64_t quota = registry_->find(step_instance_id)->mem_quota;
  publish_memory(gpu);
  if (quota == quota_before) return true;
  const auto budget = log_budget(by);
  if (!budget.log) return true;
  EGPU_LOG_INFO(
      "job %llu on GPU %u: its batch or interactive step holds %llu MiB; instance %llu gets "
      "%llu MiB of the job's memory%s",
      static_cast<unsigned long long>(job_id), gpu, static_cast<unsigned long long>(used >> 20),
      static_cast<unsigned long long>(step_instance_id),
      static_cast<unsigned long long>(quota >> 20), dropped_note(budget).c_str());
  return true;
}

}  // namespace egpu::agent
