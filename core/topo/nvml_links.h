// NVML's per-lane view of NVLink -> a GPU x GPU bandwidth matrix in hwloc's
// NVLinkBandwidth units. Pure: unit-tested without NVML.
#ifndef EGPU_CORE_TOPO_NVML_LINKS_H
#define EGPU_CORE_TOPO_NVML_LINKS_H

#include <cstdint>
#include <string>
#include <vector>

namespace egpu::topo {

enum class LaneRemote {
  kGpu,     // another GPU, named by remote_pci_bus_id
  kSwitch,  // an NVSwitch
  kOther,   // a CPU (IBM NPU) or something unknown: not a GPU path
};

struct NvlinkLane {  // one active NVLink lane of a GPU
  LaneRemote remote = LaneRemote::kOther;
  std::string remote_pci_bus_id;  // any spelling parse_pci_bus_id() accepts
};

struct NvmlGpuLanes {
  std::string pci_bus_id;  // the GPU the lanes start from
  std::vector<NvlinkLane> lanes;
};

// Values row-major over `gpu_bus_ids` (the hwloc order), MB/s per direction:
//  - direct lanes between two GPUs count once each (the larger of the two
//    GPUs' views, so a lane NVML reports on one side only still counts);
//  - NVSwitch lanes: every switch a node's GPUs reach belongs to one fabric
//    (fabric manager joins them), so two GPUs with s_i and s_j switch lanes
//    are connected by min(s_i, s_j) lanes, as hwloc's transitive closure does.
// GPUs or remote ends that are not in `gpu_bus_ids` are ignored; the diagonal is 0.
std::vector<uint64_t> nvlink_bandwidth_matrix(const std::vector<std::string>& gpu_bus_ids,
                                              const std::vector<NvmlGpuLanes>& nvml_gpus);

}  // namespace egpu::topo

#endif
