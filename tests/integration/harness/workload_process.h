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

// The nice value of every workload (where the test runs as root). On a
// production node Slurm gives each job its own cores, so a job's launching
// thread never queues for a CPU behind its neighbours or anything else; on a
// 2-core test machine it does, behind the other tests and CI's load, and a
// workload that waits milliseconds for a CPU leaves its own turns on the GPU
// idle: measured with six busy loops beside it, the greedy job of a 50/50
// split ran 42 % of the wall time at nice 0 and 48 % at this. What the tests
// judge is the split the agent makes, not how a crowded host shares its CPUs.
inline constexpr int kWorkloadNice = -10;

// Spawns the program with the GPU's environment at kWorkloadNice; stdout is
// captured.
std::unique_ptr<test_child::ChildProcess> start_workload(const SimGpu& gpu,
                                                         const WorkloadOptions& options);

// The JSON object on the last non-empty line of `stdout_text`; throws
// std::runtime_error (with the text) when there is none.
nlohmann::json parse_summary(const std::string& stdout_text);

}  // namespace egpu::harness
