#include "core/topo/nvlink_matrix.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/topo/hwloc_handle.h"

namespace egpu::topo {
namespace {

bool is_nvswitch(hwloc_obj_t obj) {
  return obj && obj->subtype && std::strcmp(obj->subtype, "NVSwitch") == 0;
}

// The GPU index an object of the matrix stands for, or -1 (switches, others).
int gpu_index_of(hwloc_obj_t obj, const std::vector<hwloc_obj_t>& gpu_pci_objs) {
  for (; obj; obj = obj->parent) {
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
      auto it = std::find(gpu_pci_objs.begin(), gpu_pci_objs.end(), obj);
      return it == gpu_pci_objs.end() ? -1 : static_cast<int>(it - gpu_pci_objs.begin());
    }
    if (obj->type != HWLOC_OBJ_OS_DEVICE) return -1;
  }
  return -1;
}

}  // namespace

int bandwidth_to_links(uint64_t bandwidth_mbs) {
  if (bandwidth_mbs == 0) return 0;
  uint64_t links = (bandwidth_mbs + kLinkBandwidthMBs / 2) / kLinkBandwidthMBs;
  return static_cast<int>(std::clamp<uint64_t>(links, 1, 1023));
}

LinkCounts read_link_counts(hwloc_topology_t topology, const std::vector<hwloc_obj_t>& gpu_pci_objs,
                            const LogFn& log) {
  const size_t n = gpu_pci_objs.size();
  LinkCounts result;
  result.links.assign(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i)
    result.links[i][i] = -1;

  DistancesList list(topology, kNvlinkMatrixName);
  for (hwloc_distances_s* matrix : list.matrices()) {
    result.matrix_found = true;
    const unsigned count = matrix->nbobjs;
    // The closure turns GPU<->switch bandwidth into GPU<->GPU; on a matrix
    // without switches it would zero the direct links, so only with switches.
    if (std::any_of(matrix->objs, matrix->objs + count, is_nvswitch) &&
        hwloc_distances_transform(topology, matrix, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE,
                                  nullptr, 0) != 0 &&
        log) {
      log(std::string("hwloc could not connect GPUs across NVSwitches (") + std::strerror(errno) +
          "); using direct GPU links only");
    }
    std::vector<int> gpu_of(count);
    for (unsigned k = 0; k < count; ++k)
      gpu_of[k] = gpu_index_of(matrix->objs[k], gpu_pci_objs);
    for (unsigned a = 0; a < count; ++a) {
      for (unsigned b = 0; b < count; ++b) {
        int from = gpu_of[a], to = gpu_of[b];
        if (from < 0 || to < 0 || from == to) continue;
        int links = bandwidth_to_links(matrix->values[a * count + b]);
        result.links[from][to] = std::max(result.links[from][to], links);
      }
    }
  }
  return result;
}

std::string add_nvlink_matrix(hwloc_topology_t topology,
                              const std::vector<hwloc_obj_t>& gpu_pci_objs,
                              std::vector<uint64_t> values) {
  const size_t n = gpu_pci_objs.size();
  if (n < 2 || values.size() != n * n)
    return "an NVLink matrix needs at least 2 GPUs and n*n values";
  std::vector<hwloc_obj_t> objs = gpu_pci_objs;  // hwloc wants non-const arrays
  // The add handle has no destroy call: hwloc frees it inside add_values or
  // add_commit on failure and on success, so nothing may fail in between.
  hwloc_distances_add_handle_t handle = hwloc_distances_add_create(
      topology, kNvlinkMatrixName,
      HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH, 0);
  if (!handle) return std::string("hwloc_distances_add_create: ") + std::strerror(errno);
  if (hwloc_distances_add_values(topology, handle, static_cast<unsigned>(n), objs.data(),
                                 values.data(), 0) != 0) {
    return std::string("hwloc_distances_add_values: ") + std::strerror(errno);
  }
  if (hwloc_distances_add_commit(topology, handle, 0) != 0) {
    return std::string("hwloc_distances_add_commit: ") + std::strerror(errno);
  }
  return "";
}

}  // namespace egpu::topo
