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

// A greedy workload of 1 ms kernels on `device` (no calibration: device time
// on the simulated GPU ignores iterations) that runs until the test stops it
// (stop_workload): a measurement never relies on a workload still running
// after a guessed time.
WorkloadOptions greedy_workload(const std::string& label, int device);

// Options every workload run in these tests gets: a duration and no calibration.
std::vector<std::string> brief_run_args(double duration_s);

// Waits for the workload, records a test failure unless it exited 0 with a JSON
// summary, and returns the summary (empty object on failure).
nlohmann::json finish_workload(test_child::ChildProcess& child);
// Stops a workload that runs until stopped (SIGTERM: it ends cleanly and
// prints its summary), then finish_workload().
nlohmann::json stop_workload(test_child::ChildProcess& child);

}  // namespace egpu::harness
