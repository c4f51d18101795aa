// The job's coordinates as the SPANK plugin (or a test) puts them in the
// environment. Parsed once, cheaply, at first use: no I/O, no threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/shm/pages.h"
#include "core/util/fail_mode.h"

namespace egpu::shim {

struct ShimEnv {
  bool managed = false;  // EGPU_JOB_ID is set
  std::string socket_path = "/run/egpu/agent.sock";
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  // CUDA ordinal i of this process is physical GPU gpu_indices[i].
  std::vector<uint32_t> gpu_indices;
  std::optional<FailMode> fail_mode;  // overrides the GPU page's
  bool debug = false;
  // Why a managed environment is unusable (then the shim passes through).
  std::string problem;
  // A setting that was ignored (said once on stderr).
  std::string warning;
};

// Reads the EGPU_* variables through `get` (getenv in the shim).
ShimEnv parse_shim_env(const char* (*get)(const char*));

}  // namespace egpu::shim
