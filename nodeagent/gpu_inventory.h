// The GPUs the agent arbitrates and their memory: from egpu.conf (GpuCount,
// GpuMemory) where set, else from core/topo (the XML named by TopologyXml, or
// the live machine with NVML).
#pragma once

#include <cstdint>
#include <vector>

#include "core/config/egpu_config.h"
#include "core/util/result.h"

namespace egpu::agent {

struct GpuInventory {
  std::vector<uint64_t> memory_bytes;  // one per GPU, index order
};

Result<GpuInventory> discover_gpus(const config::EgpuConfig& config);

}  // namespace egpu::agent
