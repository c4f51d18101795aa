#include "core/topo/nvml_links.h"

#include <algorithm>
#include <map>

#include "core/topo/nvlink_matrix.h"
#include "core/topo/pci_bus_id.h"

namespace egpu::topo {

std::vector<uint64_t> nvlink_bandwidth_matrix(const std::vector<std::string>& gpu_bus_ids,
                                              const std::vector<NvmlGpuLanes>& nvml_gpus) {
  const size_t n = gpu_bus_ids.size();
  std::map<PciAddress, size_t> index_of;
  for (size_t i = 0; i < n; ++i) {
    if (auto address = parse_pci_bus_id(gpu_bus_ids[i])) index_of.emplace(*address, i);
  }
  auto find_index = [&](const std::string& bus_id) -> int {
    auto address = parse_pci_bus_id(bus_id);
    if (!address) return -1;
    auto it = index_of.find(*address);
    return it == index_of.end() ? -1 : static_cast<int>(it->second);
  };

  std::vector<uint64_t> direct(n * n, 0);  // [from * n + to] lanes seen from `from`
  std::vector<uint64_t> switch_lanes(n, 0);
  for (const NvmlGpuLanes& gpu : nvml_gpus) {
    int from = find_index(gpu.pci_bus_id);
    if (from < 0) continue;
    for (const NvlinkLane& lane : gpu.lanes) {
      if (lane.remote == LaneRemote::kSwitch) {
        ++switch_lanes[from];
      } else if (lane.remote == LaneRemote::kGpu) {
        int to = find_index(lane.remote_pci_bus_id);
        if (to >= 0 && to != from) ++direct[from * n + to];
      }
    }
  }

  std::vector<uint64_t> values(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      uint64_t lanes = std::max(direct[i * n + j], direct[j * n + i]) +
                       std::min(switch_lanes[i], switch_lanes[j]);
      values[i * n + j] = lanes * kLinkBandwidthMBs;
    }
  }
  return values;
}

}  // namespace egpu::topo
