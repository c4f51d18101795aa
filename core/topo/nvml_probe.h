// Asks NVML (dlopen()ed at run time) for the GPUs' identity, memory and active
// NVLink lanes on a live host.
#ifndef EGPU_CORE_TOPO_NVML_PROBE_H
#define EGPU_CORE_TOPO_NVML_PROBE_H

#include <cstdint>
#include <string>
#include <vector>

#include "core/topo/nvml_links.h"
#include "core/topo/topology.h"

namespace egpu::topo {

struct NvmlGpuInfo {
  std::string pci_bus_id;  // normalized, "0000:1b:00.0"
  std::string uuid;
  std::string model;
  uint64_t memory_bytes = 0;
  std::vector<NvlinkLane> lanes;  // active lanes only
};

struct NvmlReport {
  bool available = false;  // library loaded and nvmlInit succeeded
  std::vector<NvmlGpuInfo> gpus;
};

// Never throws on NVML trouble: an absent library or a failing nvmlInit gives
// available=false and exactly one log line; per-device failures are logged and
// leave fields empty.
NvmlReport probe_nvml(const std::string& library, const LogFn& log);

}  // namespace egpu::topo

#endif
