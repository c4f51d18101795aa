// Finds the NVIDIA GPUs in a loaded hwloc topology and reads what hwloc knows
// about them: bus id, locality, and (from XML with NVML/CUDA OS devices) model,
// UUID and memory size.
#ifndef EGPU_CORE_TOPO_HWLOC_GPUS_H
#define EGPU_CORE_TOPO_HWLOC_GPUS_H

#include <hwloc.h>

#include <vector>

#include "core/topo/topology.h"

namespace egpu::topo {

struct HwlocGpu {
  hwloc_obj_t pci_device;  // owned by the topology
  Gpu gpu;                 // links left empty
};

// PCI devices of vendor 0x10de and class 0x0300 (VGA) or 0x0302 (3D), in PCI
// bus order, indexed 0..n-1 in that order. The topology must have been loaded
// with I/O objects kept.
std::vector<HwlocGpu> find_hwloc_gpus(hwloc_topology_t topology);

// How Slurm numbers the node's cores: hwloc logical Core order (PUs when the
// topology has no Core objects), grouped by Package.
struct SlurmCoreLayout {
  std::vector<std::vector<int>> socket_cores;
  int core_count = 0;
};
SlurmCoreLayout slurm_core_layout(hwloc_topology_t topology);

}  // namespace egpu::topo

#endif
