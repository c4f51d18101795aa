// Starting a workload program on a simulated GPU and reading its JSON summary.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.h"
#include "simgpu_env.h"

namespace egpu::harness {

struct WorkloadOptions {
  std::string program;            // "greedy", "ml-like", "inference-like", "hpc-like"
  std::vector<std::string> args;  // the program's options
  std::string label;              // --label and SIMGPU_LABEL
  std::map<std::string, std::string> extra_env;
  test_child::OutputMode stderr_mode = test_child::OutputMode::kInherit;
};

// Spawns the program with the GPU's environment; stdout is captured.
std::unique_ptr<test_child::ChildProcess> start_workload(const SimGpu& gpu,
                                                         const WorkloadOptions& options);

// The JSON object on the last non-empty line of `stdout_text`; throws
// std::runtime_error (with the text) when there is none.
nlohmann::json parse_summary(const std::string& stdout_text);

}  // namespace egpu::harness
