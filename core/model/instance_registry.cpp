#include "core/model/instance_registry.h"

#include <algorithm>

#include "core/slo/slo_controller.h"

namespace egpu::model {
namespace {

std::string step_name(uint64_t job_id, uint32_t step_id) {
  std::string s = std::to_string(job_id) + ".";
  switch (step_id) {
    case protocol::kStepBatch:
      return s + "batch";
    case protocol::kStepExtern:
      return s + "extern";
    case protocol::kStepInteractive:
      return s + "interactive";
    default:
      return s + std::to_string(step_id);
  }
}

Outcome fail(ReplyStatus status, std::string message) {
  return Outcome{status, std::move(message)};
}

}  // namespace

InstanceRegistry::InstanceRegistry(std::vector<uint64_t> gpu_memory, uint32_t max_slots)
    : gpu_memory_(std::move(gpu_memory)), max_slots_(max_slots) {}

const Instance* InstanceRegistry::find(uint64_t id) const {
  auto it = instances_.find(id);
  return it == instances_.end() ? nullptr : &it->second;
}

const Instance* InstanceRegistry::find(uint64_t job_id, uint32_t step_id, uint32_t gpu) const {
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id == job_id && inst.step_id == step_id && inst.gpu == gpu) return &inst;
  }
  return nullptr;
}

std::vector<const Instance*> InstanceRegistry::on_gpu(uint32_t gpu) const {
  std::vector<const Instance*> out;
  for (const auto& [id, inst] : instances_) {
    if (inst.gpu == gpu) out.push_back(&inst);
  }
  return out;
}

bool InstanceRegistry::owns_any(uid_t uid) const {
  return std::any_of(instances_.begin(), instances_.end(),
                     [uid](const auto& entry) { return entry.second.uid == uid; });
}

std::vector<const Instance*> InstanceRegistry::all() const {
  std::vector<const Instance*> out;
  for (const auto& [id, inst] : instances_)
    out.push_back(&inst);
  return out;
}

uint32_t InstanceRegistry::job_allocation(uint64_t job_id, uint32_t gpu) const {
  uint32_t alloc = 0;
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id != job_id || inst.gpu != gpu) continue;
    if (inst.umbrella) return inst.job_units;
    alloc = std::max(alloc, inst.job_units);
  }
  return alloc;
}

uint32_t InstanceRegistry::slurm_grant(uint64_t job_id, uint32_t gpu) const {
  uint32_t grant = 0;
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id != job_id || inst.gpu != gpu) continue;
    grant = std::max(grant, inst.granted_units != 0 ? inst.granted_units : inst.job_units);
  }
  return grant;
}

bool InstanceRegistry::has_umbrella(uint64_t job_id, uint32_t gpu) const {
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id == job_id && inst.gpu == gpu && inst.umbrella) return true;
  }
  return false;
}

uint32_t InstanceRegistry::job_steps_units(uint64_t job_id, uint32_t gpu,
                                           uint64_t except_id) const {
  uint32_t sum = 0;
  for (const auto& [id, inst] : instances_) {
    if (inst.job_id == job_id && inst.gpu == gpu && !inst.umbrella && id != except_id) {
      sum += inst.units;
    }
  }
  return sum;
}

uint32_t InstanceRegistry::allocated_units(uint32_t gpu) const {
  // job_allocation of each job on the GPU, in one pass: every status and
  // metrics scrape asks, and a node may hold hundreds of instances.
  struct Allocation {
    std::optional<uint32_t> umbrella;  // its job_units, which win
    uint32_t steps = 0;                // else the largest of the steps'
  };
  std::map<uint64_t, Allocation> per_job;
  for (const auto& [id, inst] : instances_) {
    if (inst.gpu != gpu) continue;
    Allocation& a = per_job[inst.job_id];
    if (inst.umbrella && !a.umbrella) a.umbrella = inst.job_units;
    a.steps = std::max(a.steps, inst.job_units);
  }
  uint32_t total = 0;
  for (const auto& [job, a] : per_job)
    total += a.umbrella.value_or(a.steps);
  return total;
}

std::optional<uint32_t> InstanceRegistry::free_slot(uint32_t gpu) const {
  std::vector<bool> used(max_slots_, false);
  for (const auto& [id, inst] : instances_) {
    if (inst.gpu == gpu && inst.slot < max_slots_) used[inst.slot] = true;
  }
  for (uint32_t s = 0; s < max_slots_; ++s) {
    if (!used[s]) return s;
  }
  return std::nullopt;
}

double InstanceRegistry::effective_share(const Instance& instance) const {
  if (!instance.umbrella) return instance.units / 100.0;
  const uint32_t steps = job_steps_units(instance.job_id, instance.gpu, instance.id);
  return instance.job_units > steps ? (instance.job_units - steps) / 100.0 : 0.0;
}

std::map<uint64_t, std::pair<double, Mode>> InstanceRegistry::faa_targets(
    uint32_t gpu, const std::map<uint64_t, int32_t>& loans) const {
  // FAA needs a positive target: an umbrella whose steps hold the whole job
  // allocation keeps this sliver (it may still burst into idle capacity).
  constexpr double kMinShare = 0.001;
  // What a lender keeps of its share: the controller's floor.
  const double lend_floor = slo::SloParams{}.lend_floor_units / 100.0;
  // Loans are the latency control's decision of its last period; instances
  // changed since (removed, resized, no longer lending or latency-critical)
  // must not carry them: only a lend instance gives, within its share above
  // the floor, only a latency-critical one takes, and no more moves than
  // both sides still account for.
  const std::vector<const Instance*> here = on_gpu(gpu);
  std::map<uint64_t, double> offered, wanted;  // by instance id, shares
  double given = 0, asked = 0;
  for (const Instance* inst : here) {
    const auto loan = loans.find(inst->id);
    if (loan == loans.end()) continue;
    if (loan->second < 0 && inst->mode == Mode::kLend) {
      const double room = std::max(0.0, effective_share(*inst) - lend_floor);
      given += offered[inst->id] = std::min(-loan->second / 100.0, room);
    } else if (loan->second > 0 && inst->latency_critical()) {
      asked += wanted[inst->id] = loan->second / 100.0;
    }
  }
  const double moving = std::min(given, asked);
  std::map<uint64_t, std::pair<double, Mode>> out;
  double sum = 0;
  for (const Instance* inst : here) {
    double share = effective_share(*inst);
    // given or asked 0: nothing moves (and no 0/0).
    if (auto o = offered.find(inst->id); o != offered.end() && moving > 0)
      share -= o->second * moving / given;
    if (auto w = wanted.find(inst->id); w != wanted.end() && moving > 0)
      share += w->second * moving / asked;
    share = std::max(kMinShare, share);
    out[inst->id] = {share, inst->mode};
    sum += share;
  }
  if (sum > 1.0) {
    for (auto& [id, t] : out)
      t.first /= sum;
  }
  return out;
}

Outcome InstanceRegistry::create(uid_t caller, const CreateSpec& spec, const Instance** created) {
  const std::string name = step_name(spec.job_id, spec.step_id);
  if (Outcome o = may_create(caller); !o.ok()) return o;
  if (spec.gpu >= gpu_memory_.size()) {
    return fail(ReplyStatus::kNotFound, "GPU " + std::to_string(spec.gpu) +
                                            " does not exist on this node (" +
                                            std::to_string(gpu_memory_.size()) + " GPUs)");
  }
  if (find(spec.job_id, spec.step_id, spec.gpu) != nullptr) {
    return fail(ReplyStatus::kExists,
                "step " + name + " already has an instance on GPU " + std::to_string(spec.gpu));
  }
  // A job is one user's: another user's step in it would share its pool and
  // allocation, and its owner could resize within them (an instance an
  // admin made that outlived its job, then the job id reused by Slurm).
  // Denied, not kExists, which SPANK takes for its own step made before.
  for (const auto& [id, other] : instances_) {
    if (other.job_id == spec.job_id && other.uid != spec.uid) {
      return fail(ReplyStatus::kDenied,
                  "job " + std::to_string(spec.job_id) + " has instances of uid " +
                      std::to_string(other.uid) + " here; step " + name + " of uid " +
                      std::to_string(spec.uid) + " is refused (remove them first)");
    }
  }
  const uint32_t job_units = spec.umbrella ? spec.units : std::max(spec.units, spec.job_units);
  const uint32_t old_alloc = job_allocation(spec.job_id, spec.gpu);
  const bool umbrella_exists = has_umbrella(spec.job_id, spec.gpu);
  if (spec.umbrella && umbrella_exists) {
    return fail(ReplyStatus::kExists, "job " + std::to_string(spec.job_id) +
                                          " already has a batch or interactive instance on GPU " +
                                          std::to_string(spec.gpu));
  }
  // With an umbrella present the job's allocation is the umbrella's; a step
  // cannot enlarge it by claiming a larger job allocation.
  const uint32_t new_alloc = spec.umbrella     ? job_units
                             : umbrella_exists ? old_alloc
                                               : std::max(old_alloc, job_units);
  const uint32_t gpu_total = allocated_units(spec.gpu) - old_alloc + new_alloc;
  if (gpu_total > 100) {
    return fail(ReplyStatus::kOverAllocation,
                "GPU " + std::to_string(spec.gpu) + " has " +
                    std::to_string(100 - (allocated_units(spec.gpu) - old_alloc)) +
                    " units free for job " + std::to_string(spec.job_id) + ", step " + name +
                    " needs " + std::to_string(new_alloc));
  }
  const uint32_t steps =
      job_steps_units(spec.job_id, spec.gpu, 0) + (spec.umbrella ? 0 : spec.units);
  if (steps > new_alloc) {
    return fail(ReplyStatus::kOverAllocation,
                "the steps of job " + std::to_string(spec.job_id) + " on GPU " +
                    std::to_string(spec.gpu) + " would hold " + std::to_string(steps) +
                    " units, the job has " + std::to_string(new_alloc));
  }
  const uint64_t mem = gpu_memory_[spec.gpu];
  const uint64_t quota = spec.mem_quota != 0 ? spec.mem_quota : mem / 100 * spec.units;
  if (mem != 0 && quota > mem) {
    return fail(ReplyStatus::kOverAllocation, "memory quota of " + std::to_string(quota) +
                                                  " bytes is more than GPU " +
                                                  std::to_string(spec.gpu) + " has");
  }
  // An explicit quota (--egpu-mem) stays within the job's part of the GPU:
  // steps check it against what gres knows, but where gres knows no GPU
  // memory this is the only place that can.
  const uint64_t allowed = mem / 100 * new_alloc;
  if (mem != 0 && spec.mem_quota > allowed) {
    return fail(ReplyStatus::kOverAllocation,
                "memory quota of " + std::to_string(spec.mem_quota) + " bytes is more than the " +
                    std::to_string(new_alloc) + " units of job " + std::to_string(spec.job_id) +
                    " on GPU " + std::to_string(spec.gpu) + " allow (" + std::to_string(allowed) +
                    " bytes)");
  }
  uint64_t granted = quota;
  if (!spec.umbrella) {
    auto q = step_memory(spec.job_id, spec.gpu, new_alloc, 0, quota, spec.mem_quota != 0,
                         spec.umbrella_mem_used);
    if (!q) return fail(ReplyStatus::kOverAllocation, q.error());
    granted = q.value();
  }
  auto slot = free_slot(spec.gpu);
  if (!slot) {
    return fail(ReplyStatus::kFull, "GPU " + std::to_string(spec.gpu) + " already has " +
                                        std::to_string(max_slots_) + " instances");
  }
  Instance inst;
  inst.id = next_id_++;
  inst.job_id = spec.job_id;
  inst.step_id = spec.step_id;
  inst.gpu = spec.gpu;
  inst.slot = *slot;
  inst.uid = spec.uid;
  inst.gid = spec.gid;
  inst.units = spec.units;
  // A step records the job's allocation on the GPU (an umbrella's, if any).
  inst.job_units = spec.umbrella ? job_units : new_alloc;
  // The grant is what the request says Slurm gave the job, never the
  // allocation, which a forced resize may have grown past it.
  inst.granted_units = std::max(job_units, slurm_grant(spec.job_id, spec.gpu));
  inst.mode = spec.mode;
  inst.mem_quota = granted;
  inst.mem_quota_explicit = spec.mem_quota != 0;
  inst.umbrella = spec.umbrella;
  inst.spans_nodes = spec.spans_nodes && !spec.umbrella;
  inst.creator = spec.creator;
  // Non-umbrella siblings learn a larger allocation if this step brought one.
  for (auto& [id, other] : instances_) {
    if (other.job_id == spec.job_id && other.gpu == spec.gpu) {
      if (!other.umbrella) other.job_units = std::max(other.job_units, new_alloc);
      other.granted_units = std::max(other.granted_units, inst.granted_units);
    }
  }
  auto [it, inserted] = instances_.emplace(inst.id, inst);
  if (created != nullptr) *created = &it->second;
  return Outcome::Ok();
}

Outcome InstanceRegistry::restore(const Instance& instance) {
  if (instance.id == 0 || instance.gpu >= gpu_memory_.size() || instance.slot >= max_slots_) {
    return fail(ReplyStatus::kBadRequest, "instance record out of range");
  }
  if (find(instance.id) != nullptr) return fail(ReplyStatus::kExists, "duplicate instance id");
  for (const auto& [id, other] : instances_) {
    if (other.gpu == instance.gpu && other.slot == instance.slot) {
      return fail(ReplyStatus::kExists, "duplicate slot");
    }
  }
  instances_.emplace(instance.id, instance);
  next_id_ = std::max(next_id_, instance.id + 1);
  return Outcome::Ok();
}

Outcome InstanceRegistry::remove(uid_t caller, uint64_t job_id, uint32_t step_id,
                                 std::vector<Instance>* removed) {
  if (caller != 0) return fail(ReplyStatus::kDenied, "only root may remove instances");
  bool any = false;
  for (auto it = instances_.begin(); it != instances_.end();) {
    if (it->second.job_id == job_id &&
        (step_id == protocol::kAllSteps || it->second.step_id == step_id)) {
      if (removed != nullptr) removed->push_back(it->second);
      it = instances_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  if (!any) {
    return fail(ReplyStatus::kNotFound,
                step_id == protocol::kAllSteps
                    ? "job " + std::to_string(job_id) + " has no instances"
                    : "step " + step_name(job_id, step_id) + " has no instances");
  }
  return Outcome::Ok();
}

namespace {
std::string instance_name(const Instance& inst) {
  return "instance " + std::to_string(inst.id) + " (step " + step_name(inst.job_id, inst.step_id) +
         " on GPU " + std::to_string(inst.gpu) + ")";
}
}  // namespace

Outcome InstanceRegistry::may_create(uid_t caller) {
  if (caller != 0) return fail(ReplyStatus::kDenied, "only root may create instances");
  return Outcome::Ok();
}

Outcome InstanceRegistry::may_change(uid_t caller, uint64_t id, bool force) const {
  const Instance* inst = find(id);
  if (inst == nullptr) return fail(ReplyStatus::kNotFound, "no instance " + std::to_string(id));
  if (caller != 0 && caller != inst->uid)
    return fail(ReplyStatus::kDenied, instance_name(*inst) + " belongs to another user");
  if (force && caller != 0) return fail(ReplyStatus::kDenied, "only root may force a resize");
  return Outcome::Ok();
}

Outcome InstanceRegistry::changeable(uid_t caller, uint64_t id, Instance** found,
                                     std::string* name) {
  if (Outcome o = may_change(caller, id); !o.ok()) return o;
  Instance& inst = instances_.at(id);
  *name = instance_name(inst);
  *found = &inst;
  return Outcome::Ok();
}

Outcome InstanceRegistry::set_objective(uid_t caller, uint64_t id,
                                        std::optional<slo::LatencyObjective> objective,
                                        Instance* updated) {
  std::string name;
  Instance* found = nullptr;
  if (Outcome o = changeable(caller, id, &found, &name); !o.ok()) return o;
  Instance& inst = *found;
  if (objective && inst.mode == Mode::kCap) {
    return fail(
        ReplyStatus::kBadRequest,
        name +
            " is in cap mode, which never goes above its share: a latency objective needs burst");
  }
  if (objective && inst.mode == Mode::kLend) {
    return fail(
        ReplyStatus::kBadRequest,
        name + " lends its share (lend mode): it cannot borrow for a latency objective as well");
  }
  inst.objective = objective;
  if (updated != nullptr) *updated = inst;
  return Outcome::Ok();
}

Outcome InstanceRegistry::resize(uid_t caller, uint64_t id, uint32_t units,
                                 std::optional<Mode> mode, Instance* updated,
                                 uint64_t umbrella_mem_used, bool force) {
  std::string name;
  Instance* found = nullptr;
  if (Outcome o = may_change(caller, id, force); !o.ok()) return o;
  if (Outcome o = changeable(caller, id, &found, &name); !o.ok()) return o;
  Instance& inst = *found;
  const uint32_t grant = slurm_grant(inst.job_id, inst.gpu);
  // Root growing the job past its grant must say so (see the header); a
  // forced allocation may shrink back towards it freely.
  const auto past_grant = [&](uint32_t allocation, uint32_t current) -> std::optional<Outcome> {
    if (force || allocation <= std::max(grant, current)) return std::nullopt;
    return fail(ReplyStatus::kOverAllocation,
                "job " + std::to_string(inst.job_id) + " has " + std::to_string(grant) +
                    " units on GPU " + std::to_string(inst.gpu) + " from Slurm; growing it to " +
                    std::to_string(allocation) +
                    " needs --force (Slurm would not know: it goes on placing other jobs on "
                    "those units)");
  };
  if (mode && *mode != Mode::kBurst && inst.objective) {
    return fail(ReplyStatus::kBadRequest,
                name + " has a latency objective (" + slo::to_string(inst.objective) +
                    "), which only burst mode can keep: clear it first (egpuctl slo " +
                    std::to_string(id) + " off)");
  }
  if (units != 0 && units != inst.units) {
    const uint32_t alloc = job_allocation(inst.job_id, inst.gpu);
    if (inst.umbrella) {
      if (caller != 0) {
        return fail(ReplyStatus::kDenied, name + " holds the job's allocation (" +
                                              std::to_string(alloc) +
                                              " units); only root may change it");
      }
      const uint32_t steps = job_steps_units(inst.job_id, inst.gpu, id);
      if (units < steps) {
        return fail(ReplyStatus::kOverAllocation, "the job's steps on GPU " +
                                                      std::to_string(inst.gpu) + " hold " +
                                                      std::to_string(steps) + " units");
      }
      if (allocated_units(inst.gpu) - alloc + units > 100) {
        return fail(ReplyStatus::kOverAllocation,
                    "GPU " + std::to_string(inst.gpu) + " has only " +
                        std::to_string(100 - (allocated_units(inst.gpu) - alloc)) + " units free");
      }
      if (auto refused = past_grant(units, alloc)) return *refused;
      inst.units = units;
      inst.job_units = units;
    } else {
      const bool umbrella_holds_allocation = has_umbrella(inst.job_id, inst.gpu);
      const uint32_t steps = job_steps_units(inst.job_id, inst.gpu, id) + units;
      if (caller != 0 || umbrella_holds_allocation) {
        if (steps > alloc) {
          return fail(ReplyStatus::kOverAllocation,
                      "job " + std::to_string(inst.job_id) + " has " + std::to_string(alloc) +
                          " units on GPU " + std::to_string(inst.gpu) + "; its steps would hold " +
                          std::to_string(steps) + " (shrink another step first)");
        }
      } else {
        // Root, and no umbrella holds the allocation: it follows the steps.
        if (allocated_units(inst.gpu) - alloc + steps > 100) {
          return fail(ReplyStatus::kOverAllocation,
                      "GPU " + std::to_string(inst.gpu) + " has only " +
                          std::to_string(100 - (allocated_units(inst.gpu) - alloc)) +
                          " units free");
        }
        if (auto refused = past_grant(steps, alloc)) return *refused;
        for (auto& [oid, o] : instances_) {
          if (o.job_id == inst.job_id && o.gpu == inst.gpu) o.job_units = steps;
        }
      }
      inst.units = units;
    }
  }
  if (mode) inst.mode = *mode;
  if (!inst.mem_quota_explicit) {
    const uint64_t share = gpu_memory_[inst.gpu] / 100 * inst.units;
    // A step's quota follows its units within what the job's pool has left.
    auto q = inst.umbrella
                 ? Result<uint64_t>(share)
                 : step_memory(inst.job_id, inst.gpu, job_allocation(inst.job_id, inst.gpu), id,
                               share, false, umbrella_mem_used);
    inst.mem_quota = q.ok() ? q.value() : share;
  }
  if (updated != nullptr) *updated = inst;
  return Outcome::Ok();
}

Outcome InstanceRegistry::authorize_attach(uid_t caller, uint64_t job_id, uint32_t step_id,
                                           uint32_t gpu, const Instance** found) const {
  const Instance* inst = find(job_id, step_id, gpu);
  if (inst == nullptr) {
    return fail(ReplyStatus::kNotFound, "no instance for step " + step_name(job_id, step_id) +
                                            " on GPU " + std::to_string(gpu));
  }
  if (caller == 0 && inst->uid != 0) {
    return fail(ReplyStatus::kDenied,
                "step " + step_name(job_id, step_id) + " belongs to uid " +
                    std::to_string(inst->uid) +
                    "; root's processes do not attach to another user's instance (its page is "
                    "that user's to write): they run as the job's fail mode says for an "
                    "agent that refuses them");
  }
  if (caller != inst->uid) {
    return fail(ReplyStatus::kDenied,
                "step " + step_name(job_id, step_id) + " belongs to another user");
  }
  if (found != nullptr) *found = inst;
  return Outcome::Ok();
}

bool InstanceRegistry::may_see_details(uid_t caller, const Instance& instance) const {
  return caller == 0 || caller == instance.uid;
}

}  // namespace egpu::model
