// EnforcedNode: one simulated node for the enforcement tests: a simulated GPU
// (tests/simgpu), the real node agent (egpu-agentd) in a private directory,
// and workloads started with the real shim preloaded into them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "share_math.h"
#include "share_sampler.h"
#include "simgpu_env.h"
#include "tests/agent/agent_fixture.h"
#include "workload_process.h"

namespace egpu::integration {

struct NodeOptions {
  int gpus = 1;
  int memory_mb = 80 * 1024;
  std::string agent_config;  // extra egpu.conf lines
  bool users = false;        // jobs run as unprivileged users (start_program's run_as)
};

struct CtlResult {
  int code = -1;
  std::string out;
  std::string err;
};

class EnforcedNode {
 public:
  explicit EnforcedNode(const std::string& tag, NodeOptions options = {});
  ~EnforcedNode();

  harness::SimGpu& gpu() { return *gpu_; }
  test::AgentProcess& agent() { return *agent_; }

  // An instance for job `job` step 0 (root creates it, as SPANK would).
  uint64_t create(uint64_t job, uint32_t units, const std::string& mode = "burst", uint32_t gpu = 0,
                  uint64_t mem_quota = 0, uid_t uid = 0);
  // A workload of job `job` on physical GPU `gpu`, with the shim preloaded.
  std::unique_ptr<test_child::ChildProcess> start(uint64_t job, harness::WorkloadOptions w,
                                                  uint32_t gpu = 0);
  // Any program of job `job`, with the shim preloaded (stdout captured).
  // `run_as`: the job's uid (NodeOptions::users), else the test's own.
  std::unique_ptr<test_child::ChildProcess> start_program(
      uint64_t job, std::vector<std::string> argv, uint32_t gpu = 0,
      std::map<std::string, std::string> env = {}, std::optional<uid_t> run_as = std::nullopt);
  std::map<std::string, std::string> job_env(uint64_t job, uint32_t gpu) const;

  CtlResult egpuctl(const std::vector<std::string>& args) const;
  harness::ShareSampler::Source source() const;

 private:
  std::unique_ptr<harness::SimGpu> gpu_;
  std::unique_ptr<test::AgentProcess> agent_;
};

// Shares of `labels` over `measure` after all have been busy for `warmup`.
// `at_edges`, if set, runs right at the start and at the end of `measure`.
harness::ShareReport measure_shares(EnforcedNode& node, const std::vector<std::string>& labels,
                                    std::chrono::milliseconds warmup,
                                    std::chrono::milliseconds measure, int device = 0,
                                    const std::function<void()>& at_edges = nullptr);

// Waits for a workload and returns its JSON summary (test failure if it
// crashed, hung or printed none).
nlohmann::json finish(test_child::ChildProcess& child,
                      std::chrono::seconds timeout = std::chrono::seconds(30));
// Stops a workload that runs until stopped (SIGTERM: it ends cleanly and
// prints its summary), then finish().
nlohmann::json stop(test_child::ChildProcess& child,
                    std::chrono::seconds timeout = std::chrono::seconds(30));

std::string memory_probe_path();
std::string shim_path();
// The greedy workload (1 ms kernels, queued deep) labelled `label`, until the
// test stops it: a measurement never relies on a workload still running after
// a guessed time.
harness::WorkloadOptions greedy(const std::string& label);
std::string cancelled_launcher_path();
std::string exec_while_waiting_path();

}  // namespace egpu::integration
