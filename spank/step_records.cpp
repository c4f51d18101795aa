#include "spank/step_records.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "core/accounting/admin_comment.h"
#include "core/accounting/step_record.h"
#include "core/util/subprocess.h"

namespace egpu::spank {

std::string node_name(const std::string& egpu_node) {
  if (!egpu_node.empty()) return egpu_node;
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) return "unknown";
  std::string name = host;
  return name.substr(0, name.find('.'));
}

std::vector<std::string> scontrol_env() {
  // scontrol as slurmstepd finds it, on its own PATH and with its own
  // SLURM_CONF (the daemon's environment, never the job's).
  const char* path = std::getenv("PATH");
  std::vector<std::string> env = {std::string("PATH=") + (path != nullptr && path[0] != '\0'
                                                              ? path
                                                              : "/usr/sbin:/usr/bin:/sbin:/bin")};
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr && conf[0] != '\0')
    env.push_back(std::string("SLURM_CONF=") + conf);
  return env;
}

std::string record_step_usage(const StepRef& step, const std::string& usage_reply, RecordKind kind,
                              int timeout_ms, const std::vector<std::string>& env) {
  auto usage = accounting::usage_from_json(usage_reply);
  if (!usage) return "cannot read the node agent's usage report: " + usage.error();
  if (usage->empty()) return "";
  if (!accounting::valid_node_name(step.node))
    return "node name '" + step.node + "' cannot go into a usage record";
  std::vector<std::string> records;
  for (const accounting::StepUsage& u : *usage)
    records.push_back(accounting::format_step_record(
        {step.job_id, step.step_id, step.node, u, kind == RecordKind::kCheckpoint}));
  const std::string request = accounting::append_request(records);
  auto update = [&](const std::string& job_ref) {
    return run_processes({{"scontrol", "update", "JobId=" + job_ref, "AdminComment=" + request}},
                         timeout_ms, &env);
  };
  auto outcome = update(step.job_ref);
  // A step's array ids come from the environment srun was started with,
  // which is the user's: SLURM_ARRAY_TASK_ID alone, in a job that is no
  // array, names a task that does not exist, and every record of the step
  // was lost. Slurm knows no such job: the job's own id is the job.
  const std::string plain = std::to_string(step.job_id);
  if (!outcome.front().ok() && step.job_ref != plain &&
      outcome.front().err.find("Invalid job id") != std::string::npos) {
    outcome = update(plain);
  }
  if (outcome.front().ok()) return "";
  return "scontrol update of the job's AdminComment failed (" + outcome.front().failure() +
         "); the step's usage was: " + request.substr(accounting::kAppendPrefix.size());
}

}  // namespace egpu::spank
