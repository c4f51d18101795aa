// InstanceRegistry: the node's instances (one Slurm step's share of one GPU),
// grouped by job and GPU, with the rules that keep them within what Slurm
// allocated: slot assignment, each instance's effective share, and who may do
// what (SO_PEERCRED uid checks). Pure logic: the agent does the I/O.
//
// Job groups: a job's batch or interactive step ("umbrella") holds the job's
// whole allocation on a GPU while it runs alone; steps started inside the job
// take their own units out of it, and the umbrella keeps the remainder. So a
// job with egpu:60 running steps of 20 and 40 uses 60 units, not 120.
//
// Memory works the same way (instance_registry_memory.cpp): a job's memory on
// a GPU is one pool, its umbrella's quota (or its allocation's share of the
// GPU without one). A step's quota comes out of what the pool has left, and
// the umbrella is limited to what its steps leave, so the batch script and
// its steps together never hold more than the job was given.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/protocol/messages.h"
#include "core/slo/latency_objective.h"
#include "core/util/mode.h"
#include "core/util/result.h"

namespace egpu::model {

using protocol::ReplyStatus;

// The process an instance ends with (kCreateEndsWithCaller); pid 0: none.
struct Creator {
  int32_t pid = 0;
  uint32_t start = 0;  // its start time in clock ticks, low 32 bits
};

struct Instance {
  uint64_t id = 0;
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t gpu = 0;
  uint32_t slot = 0;  // index in the GPU page's slot table
  uid_t uid = 0;
  gid_t gid = 0;
  uint32_t units = 0;      // the step's own units
  uint32_t job_units = 0;  // the job's allocation on this GPU
  // What Slurm granted the job on this GPU (the largest job allocation its
  // steps were created with); job_units goes past it only by a forced
  // resize. 0 (a record from before it was kept): job_units.
  uint32_t granted_units = 0;
  Mode mode = Mode::kBurst;
  uint64_t mem_quota = 0;           // bytes
  bool mem_quota_explicit = false;  // set by --egpu-mem; else it follows the units
  bool umbrella = false;
  bool spans_nodes = false;  // the step runs on other nodes too (kCreateSpansNodes)
  Creator creator;
  // Latency-critical (core/slo): it may borrow share from lend instances on
  // its GPU while this objective is at risk. Only in burst mode.
  std::optional<slo::LatencyObjective> objective;

  // The one rule for who borrows: an objective, kept only in burst mode.
  bool latency_critical() const { return objective && mode == Mode::kBurst; }
};

// memory_limit() of an instance that is accounted but never refused (the
// agent knows no memory size for its GPU and no quota was asked for).
inline constexpr uint64_t kNoMemoryLimit = UINT64_MAX;

struct Outcome {
  ReplyStatus status = ReplyStatus::kOk;
  std::string message;
  bool ok() const { return status == ReplyStatus::kOk; }
  static Outcome Ok() { return {}; }
};

struct CreateSpec {
  uint64_t job_id;
  uint32_t step_id;
  uint32_t gpu;
  uid_t uid;
  gid_t gid;
  uint32_t units;
  uint32_t job_units;
  Mode mode;
  uint64_t mem_quota;  // 0 = the units' share of the GPU's memory
  bool umbrella;
  Creator creator;
  // Bytes the job's umbrella on this GPU holds now (the agent reads it from
  // the umbrella's page); a step's quota comes out of what is left.
  uint64_t umbrella_mem_used;
  bool spans_nodes = false;
};

class InstanceRegistry {
 public:
  // gpu_memory[i] = bytes of GPU i; max_slots = instances per GPU.
  InstanceRegistry(std::vector<uint64_t> gpu_memory, uint32_t max_slots);

  size_t gpu_count() const { return gpu_memory_.size(); }
  uint64_t gpu_memory(uint32_t gpu) const { return gpu_memory_.at(gpu); }
  uint32_t max_slots() const { return max_slots_; }

  // Creates an instance (root only). Fails when the GPU's allocations would pass
  // 100 units, the job's steps would pass the job's allocation, or no slot is free.
  Outcome create(uid_t caller, const CreateSpec& spec, const Instance** created);
  // Undoes a create that failed further on: this one instance goes, the
  // step's instances on other GPUs stay.
  void erase(uint64_t id) { instances_.erase(id); }
  // Re-inserts an instance read back from the pages after an agent restart.
  Outcome restore(const Instance& instance);
  // Removes one step's instances (all GPUs), or every step of the job (root only).
  Outcome remove(uid_t caller, uint64_t job_id, uint32_t step_id, std::vector<Instance>* removed);
  // Changes units (0: unchanged) and/or mode (nullopt: unchanged). The owner
  // may move units between the job's steps but never past the job's
  // allocation, and may not change the allocation itself. Root may set
  // anything that fits the GPU within what Slurm granted the job there, and
  // past that only with `force` (Slurm does not learn of it and goes on
  // placing other jobs on units it thinks free, which the agent then
  // refuses). `umbrella_mem_used` as in CreateSpec.
  Outcome resize(uid_t caller, uint64_t id, uint32_t units, std::optional<Mode> mode,
                 Instance* updated, uint64_t umbrella_mem_used = 0, bool force = false);

  // Sets or clears (nullopt) a latency objective; owner or root. Refused
  // for cap (it never goes above its share) and lend (it gives share; it
  // cannot borrow as well) instances.
  Outcome set_objective(uid_t caller, uint64_t id, std::optional<slo::LatencyObjective> objective,
                        Instance* updated);

  // The instance's own user only, root included: an instance page is its
  // user's to write, and a shim runs the page's robust lock, whose list
  // pointers live in the page (glibc unlinks through them), in the process
  // that attaches. Root's process would write where that user points.
  Outcome authorize_attach(uid_t caller, uint64_t job_id, uint32_t step_id, uint32_t gpu,
                           const Instance** found) const;
  bool may_see_details(uid_t caller, const Instance& instance) const;
  // What create and resize check first, for callers that would otherwise
  // read /proc or pages on a request they are about to refuse.
  static Outcome may_create(uid_t caller);
  // The owner or root; a forced resize root only.
  Outcome may_change(uid_t caller, uint64_t id, bool force = false) const;

  const Instance* find(uint64_t id) const;
  const Instance* find(uint64_t job_id, uint32_t step_id, uint32_t gpu) const;
  std::vector<const Instance*> on_gpu(uint32_t gpu) const;
  std::vector<const Instance*> all() const;
  // Whether `uid` owns an instance here (the control socket counts the
  // connections of uids that own none together).
  bool owns_any(uid_t uid) const;

  // The share FAA enforces for an instance, as a fraction of the GPU (0..1).
  double effective_share(const Instance& instance) const;
  // The FAA target and mode of every instance on a GPU: effective shares,
  // each at least a sliver FAA can work with, scaled to sum to at most 1.
  // `loans`: units the latency controller moved (+ borrowed, - lent, by
  // instance id; they add up to 0). The one place share arithmetic happens;
  // the arbiter applies it.
  std::map<uint64_t, std::pair<double, Mode>> faa_targets(
      uint32_t gpu, const std::map<uint64_t, int32_t>& loans = {}) const;
  // The bytes the shims enforce for an instance (kNoMemoryLimit: none): its
  // own quota, and for an umbrella what its job's steps leave of it.
  uint64_t memory_limit(const Instance& instance) const;
  // The job's umbrella on a GPU, if it has one.
  const Instance* umbrella_of(uint64_t job_id, uint32_t gpu) const;
  // The umbrella was found holding `bytes` more than its new limit (it
  // allocated while a step was being created): the step with id `step_id`
  // gives them up. False if that step's quota was asked for explicitly
  // (--egpu-mem) and cannot shrink; nothing changes then.
  bool take_step_memory(uint64_t step_id, uint64_t bytes);
  // Units allocated on a GPU (sum of job allocations).
  uint32_t allocated_units(uint32_t gpu) const;

 private:
  // The instance `caller` (its owner or root) may change, and its name for
  // messages; kNotFound or kDenied otherwise.
  Outcome changeable(uid_t caller, uint64_t id, Instance** found, std::string* name);
  uint32_t job_steps_units(uint64_t job_id, uint32_t gpu, uint64_t except_id) const;
  uint32_t job_allocation(uint64_t job_id, uint32_t gpu) const;
  bool has_umbrella(uint64_t job_id, uint32_t gpu) const;
  // What Slurm granted the job on the GPU (Instance::granted_units).
  uint32_t slurm_grant(uint64_t job_id, uint32_t gpu) const;
  // A step's quota: `wanted` (explicit or the units' share), within what the
  // job's memory pool has left; an error when an explicit one does not fit.
  Result<uint64_t> step_memory(uint64_t job_id, uint32_t gpu, uint32_t job_units,
                               uint64_t except_id, uint64_t wanted, bool explicit_quota,
                               uint64_t umbrella_mem_used) const;
  uint64_t steps_memory(uint64_t job_id, uint32_t gpu, uint64_t except_id) const;
  std::optional<uint32_t> free_slot(uint32_t gpu) const;

  std::vector<uint64_t> gpu_memory_;
  uint32_t max_slots_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Instance> instances_;  // by id
};

}  // namespace egpu::model
