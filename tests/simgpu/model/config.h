// simgpu's configuration, read from the environment of the process that
// creates the shared segment (later processes use the segment's copy).
//   SIMGPU_SHM            POSIX shm name, default /simgpu-<uid>
//   SIMGPU_DEVICES        1..16, default 1
//   SIMGPU_MEMORY_MB      per device, default 81559 (an H100 80GB)
//   SIMGPU_TIMESLICE_US   hardware time slice between contexts, default 2000
//   SIMGPU_DEVICE_NAME    default "NVIDIA H100 80GB HBM3 (simulated)"
//   SIMGPU_PCI_BUSES      hex PCI bus numbers per device, comma separated
//                         (default: those of tests' dgx-h100-like topology)
//   SIMGPU_SHM_MODE       octal permissions of a new segment, default 0600
//   SIMGPU_FABRIC         shm name of a board shared with other segments
//                         (simulated nodes) for collectives; default none
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/layout.h"

namespace egpu::simgpu {

struct SimConfig {
  std::string shm_name;
  uint32_t device_count = 1;
  uint64_t memory_bytes = uint64_t{81559} << 20;
  uint64_t timeslice_ns = 2'000'000;
  std::string device_name = "NVIDIA H100 80GB HBM3 (simulated)";
  std::vector<uint8_t> pci_bus;  // one per device
  uint32_t shm_mode = 0600;
  std::string fabric_name;  // empty: collectives meet on the segment's own board
};

using EnvLookup = std::function<const char*(const char*)>;

// Parses the configuration; on a malformed or out-of-range value returns
// nullopt and explains in *error.
std::optional<SimConfig> parse_config(const EnvLookup& getenv_fn, std::string* error);

std::optional<SimConfig> config_from_environment(std::string* error);

std::string default_shm_name();

// The file simgpu maps for device `physical` as the real driver maps
// /dev/nvidiaN: /dev/shm/<segment name>.gpu<N> (driver_state.cc).
std::string device_file_path(const std::string& shm_name, uint32_t physical);

// The PCI bus of device `index` when SIMGPU_PCI_BUSES does not say.
uint8_t default_pci_bus(uint32_t index);

// Fills the segment's copy of the configuration.
SegmentConfig to_segment_config(const SimConfig& config);

}  // namespace egpu::simgpu
