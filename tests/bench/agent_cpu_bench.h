// The node agent's CPU use with many instances: N instances spread over
// simulated GPUs, one attached greedy process each, all launching; the
// agent's CPU time from /proc/<pid>/stat over the measurement.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>

namespace egpu::bench {

struct AgentCpuOptions {
  int instances = 64;
  int gpus = 4;
  double kernel_us = 2000;  // long kernels keep 64 processes light on a small machine
  std::chrono::milliseconds warmup{2000};
  std::chrono::milliseconds measure{10000};
};

// {"cpu_percent_of_one_core": ..., "instances_with_device_time": ..., ...}
nlohmann::json run_agent_cpu_bench(const AgentCpuOptions& options);

}  // namespace egpu::bench
