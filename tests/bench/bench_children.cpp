#include "bench_children.h"

#include <signal.h>

#include <cstdio>
#include <exception>

#include "core/env/egpu_env_names.h"
#include "workload_process.h"

namespace egpu::bench {

std::unique_ptr<test_child::ChildProcess> start_unmanaged(const harness::SimGpu& gpu,
                                                          std::vector<std::string> argv,
                                                          const std::string& label) {
  test_child::ChildOptions o;
  o.argv = std::move(argv);
  o.env = gpu.environment(label);
  o.unset_env = {"LD_PRELOAD", EGPU_ENV_JOB_ID, EGPU_ENV_STEP_ID, EGPU_ENV_GPU_INDICES,
                 EGPU_ENV_SOCKET};
  o.stdout_mode = test_child::OutputMode::kCapture;
  o.stderr_mode = test_child::OutputMode::kCapture;
  return std::make_unique<test_child::ChildProcess>(o);
}

nlohmann::json wait_summary(test_child::ChildProcess& child, const std::string& what,
                            std::chrono::seconds timeout) {
  const auto status = child.wait_for(timeout);
  if (!status) {
    child.kill(SIGKILL);
    std::fprintf(stderr, "egpu-bench: %s hung; killed\n", what.c_str());
    return nlohmann::json::object();
  }
  if (!status->success()) {
    std::fprintf(stderr, "egpu-bench: %s failed (%s):\n%s\n", what.c_str(),
                 status->describe().c_str(), child.stderr_text().c_str());
    return nlohmann::json::object();
  }
  try {
    return harness::parse_summary(child.stdout_text());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "egpu-bench: %s: %s\n", what.c_str(), e.what());
    return nlohmann::json::object();
  }
}

}  // namespace egpu::bench
