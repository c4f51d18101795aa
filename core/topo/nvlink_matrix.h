// NVLink in hwloc's model: the "NVLinkBandwidth" distances matrix (MB/s per
// direction, summed over links). Reading it into link counts is the one path
// for XML files and live hosts; live hosts first add a matrix built from NVML.
#ifndef EGPU_CORE_TOPO_NVLINK_MATRIX_H
#define EGPU_CORE_TOPO_NVLINK_MATRIX_H

#include <hwloc.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/topo/topology.h"

namespace egpu::topo {

inline constexpr const char* kNvlinkMatrixName = "NVLinkBandwidth";
// One NVLink lane carries 25 GB/s per direction (NVLink 2-4: V100, A100, H100/H200).
inline constexpr uint64_t kLinkBandwidthMBs = 25000;

// Bandwidth -> link count: nearest whole number of lanes, at least 1 when
// there is any bandwidth, at most 1023 (Slurm's Links= limit).
int bandwidth_to_links(uint64_t bandwidth_mbs);

struct LinkCounts {
  bool matrix_found = false;
  // [i][j]: links from GPU i to GPU j, -1 on the diagonal; 0 without a matrix.
  std::vector<std::vector<int>> links;
};

// Reads every NVLinkBandwidth matrix in the topology. Matrix objects may be the
// GPUs' PCI devices or OS devices below them (nvmlN, cudaN); NVSwitch shapes
// (GPU<->switch entries only) go through hwloc's transitive closure first.
LinkCounts read_link_counts(hwloc_topology_t topology, const std::vector<hwloc_obj_t>& gpu_pci_objs,
                            const LogFn& log);

// Adds a matrix over the GPUs' PCI devices (values row-major, n*n MB/s).
// Returns "" on success, else what went wrong.
std::string add_nvlink_matrix(hwloc_topology_t topology,
                              const std::vector<hwloc_obj_t>& gpu_pci_objs,
                              std::vector<uint64_t> values);

}  // namespace egpu::topo

#endif
