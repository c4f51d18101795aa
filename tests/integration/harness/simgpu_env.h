// The simulated GPU as a test fixture: a unique shared-memory segment name per
// test (unlinked at the end), the environment every process on that simulated
// GPU needs, and where the binaries are.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace egpu::harness {

// Folder of the simulated libcuda.so.1 (LD_LIBRARY_PATH for the children).
std::string simgpu_lib_dir();
// Path of a workload program ("greedy", "ml-like", ...).
std::string workload_path(std::string_view name);

struct SimGpuConfig {
  int devices = 1;
  int memory_mb = 0;             // 0: the simulator's default
  int timeslice_us = 0;          // 0: the simulator's default
  bool shared_by_users = false;  // processes of several uids use it (segment 0666)
};

// Owns one simulated GPU's segment name; shm_unlinks it when destroyed.
class SimGpu {
 public:
  explicit SimGpu(std::string_view tag, SimGpuConfig config = {});
  ~SimGpu();
  SimGpu(const SimGpu&) = delete;
  SimGpu& operator=(const SimGpu&) = delete;

  const std::string& shm_name() const { return shm_name_; }
  // The file simgpu maps for `device` as the driver maps /dev/nvidiaN (what
  // the agent's GpuDeviceFiles names on a simulated node).
  std::string device_file(uint32_t device) const;
  // The same with "%d" for the device (egpu.conf's GpuDeviceFiles).
  std::string device_file_pattern() const { return "/dev/shm" + shm_name_ + ".gpu%d"; }
  const SimGpuConfig& config() const { return config_; }

  // LD_LIBRARY_PATH and SIMGPU_* for a process on this GPU; `label` names its
  // contexts in the statistics (omitted when empty).
  std::map<std::string, std::string> environment(std::string_view label = {}) const;

 private:
  std::string shm_name_;
  SimGpuConfig config_;
};

}  // namespace egpu::harness
