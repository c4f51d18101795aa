#include "test_support.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <exception>

namespace egpu::harness {

std::vector<std::string> brief_run_args(double duration_s) {
  return {"--duration-s", std::to_string(duration_s), "--iters-per-us", "1"};
}

WorkloadOptions greedy_workload(const std::string& label, int device) {
  WorkloadOptions options;
  options.program = "greedy";
  options.args = brief_run_args(0);  // 0: until a signal
  options.args.insert(options.args.end(),
                      {"--device", std::to_string(device), "--kernel-us", "1000"});
  options.label = label;
  return options;
}

nlohmann::json finish_workload(test_child::ChildProcess& child) {
  const auto status = child.wait_for(kEndTimeout);
  if (!status) {
    ADD_FAILURE() << "workload " << child.pid() << " did not end in time";
    return nlohmann::json::object();
  }
  EXPECT_TRUE(status->success()) << "workload " << child.pid() << ": " << status->describe();
  try {
    return parse_summary(child.stdout_text());
  } catch (const std::exception& error) {
    ADD_FAILURE() << "workload " << child.pid() << ": " << error.what();
    return nlohmann::json::object();
  }
}

nlohmann::json stop_workload(test_child::ChildProcess& child) {
  child.kill(SIGTERM);
  return finish_workload(child);
}

}  // namespace egpu::harness
