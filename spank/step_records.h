// What a step's instances on this node achieved (when they are removed, or
// so far while the step runs: step_checkpoints.h), as records in the job's
// AdminComment (core/accounting/admin_comment.h), where
// sacct shows them after the job ended. Written by slurmstepd (root) through
// scontrol, whose protocol matches the running slurmctld (the plugin itself
// is built against one Slurm's SPANK API only); job_submit/egpu appends them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace egpu::spank {

// The step a record is of. `job_ref` names the job to scontrol exactly:
// "ARRAYID_TASK" for a task of an array (its own id may be the array's,
// which scontrol takes for every task), else the job id.
struct StepRef {
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  std::string job_ref;
  std::string node;  // node_name()
};

enum class RecordKind {
  kFinal,       // the step ended here: its instances were removed
  kCheckpoint,  // the step runs on: usage so far (running=1)
};

// `usage_reply`: the agent's answer to the step's RemoveRequest (final) or
// UsageRequest (checkpoint), accounting::removal_to_json / usage_to_json.
// Returns "" when done or there was nothing to record; else what went
// wrong, with the records, so the caller's log keeps them.
// `env`: scontrol's environment (scontrol_env()).
std::string record_step_usage(const StepRef& step, const std::string& usage_reply, RecordKind kind,
                              int timeout_ms, const std::vector<std::string>& env);

// slurmstepd's PATH and SLURM_CONF (the daemon's, never the job's), for
// scontrol. Read it where no other thread may change the environment.
std::vector<std::string> scontrol_env();

// This node's Slurm name: `egpu_node` ($EGPU_NODE of the step, which
// gres/egpu sets from slurmd's own name over whatever the job's environment
// said) when set, else the host's short name.
std::string node_name(const std::string& egpu_node);

}  // namespace egpu::spank
