#include "nodeagent/gpu_inventory.h"

#include "core/topo/topology.h"
#include "core/util/log.h"

namespace egpu::agent {

Result<GpuInventory> discover_gpus(const config::EgpuConfig& config) {
  GpuInventory inv;
  std::vector<uint64_t> topo_memory;
  const bool need_topology = config.gpu_count < 0 || config.gpu_memory_bytes == 0;
  if (need_topology) {
    auto log = [](std::string_view line) {
      EGPU_LOG_INFO("topology: %.*s", static_cast<int>(line.size()), line.data());
    };
    topo::LoadResult loaded;
    if (!config.topology_xml.empty()) {
      loaded = topo::load_from_xml(config.topology_xml, topo::XmlOptions{log});
    } else {
      topo::LiveOptions live;
      live.log = log;
      loaded = topo::load_live(live);
    }
    if (!loaded.ok()) {
      return Error{"cannot discover GPUs: " + loaded.error +
                   " (set GpuCount= and GpuMemory= in egpu.conf to run without a topology)"};
    }
    for (const auto& gpu : loaded.topology->gpus)
      topo_memory.push_back(gpu.memory_bytes);
  }
  const size_t count =
      config.gpu_count >= 0 ? static_cast<size_t>(config.gpu_count) : topo_memory.size();
  if (count == 0)
    return Error{"no GPUs found on this node (set GpuCount= in egpu.conf to override)"};
  for (size_t i = 0; i < count; ++i) {
    uint64_t mem = config.gpu_memory_bytes;
    if (mem == 0 && i < topo_memory.size()) mem = topo_memory[i];
    if (mem == 0) {
      return Error{"the memory size of GPU " + std::to_string(i) +
                   " is unknown (no NVML, or a topology without it): set GpuMemory= in egpu.conf"};
    }
    inv.memory_bytes.push_back(mem);
  }
  return inv;
}

}  // namespace egpu::agent
