// What egpuctl reads from Slurm's own commands to act on a job from any node:
// where a job and its steps run (squeue), and the node names of a host list
// (scontrol show hostnames). Slurm's output is input like any other: what is
// used is checked (names plain, host lists of host-list characters), and a
// step line of another shape is left out, never guessed at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace egpu::model {

// `squeue -h -j JOB -o '%T|%u|%N'`: the job's state, owner and nodes.
struct JobPlacement {
  std::string state;     // RUNNING, PENDING, ...
  std::string user;      // the owner's name
  std::string nodelist;  // Slurm host list, e.g. n[1-2]
};
inline constexpr const char* kJobListingFormat = "%T|%u|%N";
Result<JobPlacement> parse_job_listing(std::string_view text, uint64_t job);

// `squeue -h -s -j JOB -o '%i|%N'`: each running step and its nodes.
struct StepPlacement {
  std::string step;  // "0", "batch", "extern", ...
  std::string nodelist;
};
inline constexpr const char* kStepListingFormat = "%i|%N";
Result<std::vector<StepPlacement>> parse_step_listing(std::string_view text, uint64_t job);

// The step's host list; an error that names the steps that do run.
Result<std::string> step_nodelist(const std::vector<StepPlacement>& steps, uint64_t job,
                                  const std::string& step);

// `scontrol show hostnames LIST`: one node name per line.
Result<std::vector<std::string>> parse_hostnames(std::string_view text);

// A name Slurm may use for a node or a user and that is safe on a command line.
bool is_plain_name(std::string_view name);

}  // namespace egpu::model
