// RAII owners for hwloc resources: a topology, and the distances matrices
// hwloc_distances_get_by_name() hands out (each must be released).
#ifndef EGPU_CORE_TOPO_HWLOC_HANDLE_H
#define EGPU_CORE_TOPO_HWLOC_HANDLE_H

#include <hwloc.h>

#include <memory>
#include <vector>

namespace egpu::topo {

struct HwlocTopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocTopologyDeleter>;

// hwloc_topology_init() wrapped; null when hwloc could not allocate one.
inline HwlocTopology make_hwloc_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return nullptr;
  return HwlocTopology(raw);
}

// The distances matrices of one name; released on destruction. The topology
// must outlive this object.
class DistancesList {
 public:
  DistancesList(hwloc_topology_t topology, const char* name) : topology_(topology) {
    unsigned count = 0;
    if (hwloc_distances_get_by_name(topology, name, &count, nullptr, 0) != 0 || count == 0) return;
    matrices_.resize(count);
    if (hwloc_distances_get_by_name(topology, name, &count, matrices_.data(), 0) != 0) count = 0;
    matrices_.resize(count);  // hwloc may return fewer than first announced
  }
  ~DistancesList() {
    for (hwloc_distances_s* matrix : matrices_)
      hwloc_distances_release(topology_, matrix);
  }
  DistancesList(const DistancesList&) = delete;
  DistancesList& operator=(const DistancesList&) = delete;

  const std::vector<hwloc_distances_s*>& matrices() const { return matrices_; }

 private:
  hwloc_topology_t topology_;
  std::vector<hwloc_distances_s*> matrices_;
};

}  // namespace egpu::topo

#endif
