// Helpers shared by the simgpu acceptance tests.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"
#include "workload_process.h"

namespace egpu::harness {

inline constexpr auto kSampleInterval = std::chrono::milliseconds(20);
inline constexpr auto kStartTimeout = std::chrono::milliseconds(10000);
inline constexpr auto kEndTimeout = std::chrono::milliseconds(60000);

// A greedy workload of 1 ms kernels on `device` for `duration_s` (no
// calibration: device time on the simulated GPU ignores iterations).
WorkloadOptions greedy_workload(const std::string& label, int device, double duration_s);

// Options every workload run in these tests gets: a duration and no calibration.
std::vector<std::string> brief_run_args(double duration_s);

// Waits for the workload, records a test failure unless it exited 0 with a JSON
// summary, and returns the summary (empty object on failure).
nlohmann::json finish_workload(test_child::ChildProcess& child);

}  // namespace egpu::harness
