// egpuctl on the nodes of a job, from anywhere Slurm's commands work (a login
// node, another compute node): squeue says where the job and its steps run,
// and `srun --overlap --jobid` starts `egpuctl --local` on each of those nodes
// as a step of the job itself, so Slurm decides who may (the job's owner)
// and each node's agent then checks the caller's rights as it always does.
// Slurm lets no one else start a step in a job, root included: root's calls
// run as the job's owner (runuser) and so get the owner's rights there.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model/slurm_listing.h"
#include "core/util/result.h"
#include "core/util/subprocess.h"

namespace egpu::ctl {

struct JobOnSlurm {
  uint64_t job = 0;
  model::JobPlacement placement;
  std::vector<model::StepPlacement> steps;
};

// Whether Slurm's client commands are here (squeue on PATH).
bool slurm_clients_present();

Result<JobOnSlurm> find_job(uint64_t job);
Result<std::vector<std::string>> expand_nodes(const std::string& nodelist);

struct NodeOutcome {
  std::string node;
  ProcessOutcome run;
  // Why it failed: egpuctl's own message on the node when it gave one
  // (srun's lines about the task's exit come around it in any order).
  std::string why() const;
  // egpuctl ran on the node (it succeeded or said why not), or may still be
  // running there (no answer in time); false when srun could not start it.
  bool may_have_changed() const;
};
// The environment srun gets. The caller's own, without Slurm's job and step
// options (SLURM_*, SRUN_*, but SLURM_CONF), which inside a job would shape
// the relay step like the job's (--cpus-per-task, --mem, --label, ...). For
// another user (root relaying as a job's owner) only PATH, SLURM_CONF and the
// locale: srun exports its environment to the step, whose processes are the
// owner's, and root's may hold credentials (tokens, proxy passwords).
std::vector<std::string> relay_environment(const char* const* env, bool for_another_user);

// Runs `egpuctl --local ARGS` on each node, all at once, as a step of the job;
// args_per_node[i] on nodes[i].
// Its stderr's control characters are made visible (core/util/printable.h).
std::vector<NodeOutcome> egpuctl_on_nodes(
    const JobOnSlurm& job, const std::vector<std::string>& nodes,
    const std::vector<std::vector<std::string>>& args_per_node);

// A node's `--json` output, parsed (discarded when not JSON, or nested
// deeper than an agent's answer ever is), its strings' control characters
// made visible: the job's owner's process wrote it.
nlohmann::json relayed_json(const std::string& out);

}  // namespace egpu::ctl
