// StepPlan: from what Slurm told a step (the EGPU_* variables gres/egpu wrote
// into its environment) and the user's --egpu-* options, the instances the
// SPANK plugin asks the agent to create. Pure, so every rule is unit-tested
// without Slurm.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/protocol/messages.h"
#include "core/slo/latency_objective.h"
#include "core/util/mode.h"
#include "core/util/result.h"

namespace egpu::model {

struct StepEnv {
  std::string gpu_indices;  // EGPU_GPU_INDICES, e.g. "0,3"
  std::string units;        // EGPU_UNITS, e.g. "100,20"
  std::string mem_quota;    // EGPU_MEM_QUOTA, bytes per GPU ("0" = unknown)
  // EGPU_JOB_UNITS: the job's units on each GPU ("0" or absent = unknown).
  // On a node without the batch step it is how the agent learns the job's
  // allocation there; otherwise the batch step's instance holds it.
  std::string job_units = {};
};

struct StepIdentity {
  uint64_t job_id;
  uint32_t step_id;
  uid_t uid;
  gid_t gid;
  bool spans_nodes = false;  // the step has tasks on other nodes too
};

struct StepOptions {
  std::optional<Mode> mode;                        // --egpu-mode
  std::optional<uint64_t> mem_bytes;               // --egpu-mem, per GPU
  std::optional<slo::LatencyObjective> objective;  // --egpu-slo (nullopt: none, or off)
};

// The options together, with the site's DefaultMode: an objective needs
// burst (cap never goes above its share; lend gives share away).
Status check_step_options(const StepOptions& options, Mode default_mode);

// What a step without egpu units says of the egpu options it was given
// (they do nothing there), naming them; empty when it was given none. A
// warning, not an error: srun steps inherit sbatch's options.
std::string options_without_egpu(const StepOptions& options);

// Whether a step id is the job's umbrella (batch or interactive step).
bool is_umbrella_step(uint32_t step_id);

// The create requests for the step; an empty list when the step has no egpu
// allocation (no EGPU_UNITS). Errors name the variable or option at fault.
// An objective is set on each created instance afterwards (ObjectiveRequest).
Result<std::vector<protocol::CreateRequest>> plan_step_instances(const StepEnv& env,
                                                                 const StepIdentity& id,
                                                                 const StepOptions& options,
                                                                 Mode default_mode);

// --egpu-mode and --egpu-mem as users type them. `max_bytes` (0 = unknown)
// is the largest GPU memory on the node, to refuse impossible sizes early.
Result<Mode> parse_mode_option(const std::string& text);
Result<uint64_t> parse_mem_option(const std::string& text, uint64_t max_bytes);
// --egpu-slo: "p99:40ms" or "off" (nullopt).
Result<std::optional<slo::LatencyObjective>> parse_slo_option(const std::string& text);

}  // namespace egpu::model
