// After a step's instances on this node are removed: what they achieved, as
// records in the job's AdminComment (core/accounting/admin_comment.h), where
// sacct shows them after the job ended. Written by slurmstepd (root) through
// scontrol, whose protocol matches the running slurmctld (the plugin itself
// is built against one Slurm's SPANK API only); job_submit/egpu appends them.
#pragma once

#include <cstdint>
#include <string>

namespace egpu::spank {

// `removal_reply`: the agent's answer to the step's RemoveRequest
// (accounting::removal_to_json). `job_ref` names the job to scontrol exactly:
// "ARRAYID_TASK" for a task of an array (its own id may be the array's,
// which scontrol takes for every task), else the job id. Returns "" when
// done or there was nothing to record; else what went wrong, with the
// records, so the caller's log keeps them.
std::string record_step_usage(uint64_t job_id, uint32_t step_id, const std::string& job_ref,
                              const std::string& node, const std::string& removal_reply,
                              int timeout_ms);

// This node's Slurm name: `egpu_node` ($EGPU_NODE of the step, which
// gres/egpu sets from slurmd's own name over whatever the job's environment
// said) when set, else the host's short name.
std::string node_name(const std::string& egpu_node);

}  // namespace egpu::spank
