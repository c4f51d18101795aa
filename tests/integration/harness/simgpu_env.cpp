#include "simgpu_env.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

namespace egpu::harness {

std::string simgpu_lib_dir() {
  return EGPU_SIMGPU_LIB_DIR;
}

std::string workload_path(std::string_view name) {
  return std::string(EGPU_WORKLOAD_DIR) + "/" + std::string(name);
}

namespace {

// Unique across processes (pid), tests in one process (counter) and reruns
// after a crash left a segment behind (time).
std::string unique_name(std::string_view tag) {
  static std::atomic<unsigned> counter{0};
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return "/egpu-test-" + std::string(tag) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(counter++) + "-" + std::to_string(now % 1000000);
}

}  // namespace

SimGpu::SimGpu(std::string_view tag, SimGpuConfig config)
    : shm_name_(unique_name(tag)), config_(config) {}

SimGpu::~SimGpu() {
  // The segment and the device file of each device beside it (what simgpu
  // maps as the driver maps /dev/nvidiaN).
  for (int d = 0; d < config_.devices; ++d)
    unlink(device_file(static_cast<uint32_t>(d)).c_str());
  shm_unlink(shm_name_.c_str());
}

std::string SimGpu::device_file(uint32_t device) const {
  return "/dev/shm" + shm_name_ + ".gpu" + std::to_string(device);
}

std::map<std::string, std::string> SimGpu::environment(std::string_view label) const {
  std::map<std::string, std::string> env{
      {"LD_LIBRARY_PATH", simgpu_lib_dir()},
      {"SIMGPU_SHM", shm_name_},
      {"SIMGPU_DEVICES", std::to_string(config_.devices)},
  };
  if (config_.memory_mb > 0) env["SIMGPU_MEMORY_MB"] = std::to_string(config_.memory_mb);
  if (config_.timeslice_us > 0) env["SIMGPU_TIMESLICE_US"] = std::to_string(config_.timeslice_us);
  if (config_.shared_by_users) env["SIMGPU_SHM_MODE"] = "0666";
  if (!label.empty()) env["SIMGPU_LABEL"] = std::string(label);
  return env;
}

}  // namespace egpu::harness
