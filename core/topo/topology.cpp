#include "core/topo/topology.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/topo/hwloc_gpus.h"
#include "core/topo/hwloc_handle.h"
#include "core/topo/nvlink_matrix.h"
#include "core/topo/nvml_links.h"
#include "core/topo/nvml_probe.h"
#include "core/topo/xml_file_check.h"

namespace egpu::topo {
namespace {

constexpr const char* kNoGpuReason = "no PCI device of vendor 10de with class 0300 or 0302";

LogFn or_stderr(const LogFn& log) {
  if (log) return log;
  return [](std::string_view line) {
    std::fprintf(stderr, "egpu-topo: %.*s\n", static_cast<int>(line.size()), line.data());
  };
}

LoadResult failure(std::string error) {
  return LoadResult{std::nullopt, std::move(error)};
}

// Loads hwloc from `xml_path` or, when empty, from the hardware. On failure
// the returned pointer is null and `error` says why.
HwlocTopology load_hwloc(const std::string& xml_path, hwloc_type_filter_e io_filter,
                         std::string& error) {
  if (!xml_path.empty()) {
    error = check_topology_xml_file(xml_path);
    if (!error.empty()) return nullptr;
  }
  HwlocTopology topology = make_hwloc_topology();
  if (!topology) {
    error = "hwloc_topology_init failed";
    return nullptr;
  }
  // I/O objects (PCI devices) are dropped by default, from XML too.
  hwloc_topology_set_io_types_filter(topology.get(), io_filter);
  // A failed set_xml would otherwise fall back to loading this machine.
  if (!xml_path.empty() && hwloc_topology_set_xml(topology.get(), xml_path.c_str()) != 0) {
    error = "hwloc cannot use topology XML '" + xml_path + "': " + std::strerror(errno);
    return nullptr;
  }
  if (hwloc_topology_load(topology.get()) != 0) {
    error = xml_path.empty()
                ? std::string("hwloc could not read this host's topology: ") + std::strerror(errno)
                : "hwloc could not parse topology XML '" + xml_path +
                      "': malformed XML or not a valid hwloc topology";
    return nullptr;
  }
  return topology;
}

std::vector<hwloc_obj_t> pci_objects(const std::vector<HwlocGpu>& gpus) {
  std::vector<hwloc_obj_t> objs;
  for (const HwlocGpu& gpu : gpus)
    objs.push_back(gpu.pci_device);
  return objs;
}

// The part both loaders share: links from the topology's NVLinkBandwidth
// matrix, socket layout, and the result.
Topology assemble(hwloc_topology_t topology, std::string source, std::vector<HwlocGpu>& gpus,
                  const LogFn& log) {
  LinkCounts links = read_link_counts(topology, pci_objects(gpus), log);
  SlurmCoreLayout layout = slurm_core_layout(topology);
  Topology result;
  result.source = std::move(source);
  result.socket_cores = std::move(layout.socket_cores);
  result.core_count = layout.core_count;
  result.has_nvlink = links.matrix_found;
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].gpu.links = std::move(links.links[i]);
    result.gpus.push_back(std::move(gpus[i].gpu));
  }
  return result;
}

// Copies identity and memory from NVML onto the hwloc GPUs (matched by bus id)
// and, unless hwloc already has one, adds an NVLinkBandwidth matrix built from
// NVML's lanes.
void merge_nvml(hwloc_topology_t topology, std::vector<HwlocGpu>& gpus, const NvmlReport& nvml,
                const LogFn& log) {
  std::vector<std::string> bus_ids;
  for (const HwlocGpu& gpu : gpus)
    bus_ids.push_back(gpu.gpu.pci_bus_id);
  std::vector<NvmlGpuLanes> lanes;
  for (const NvmlGpuInfo& info : nvml.gpus) {
    auto it = std::find(bus_ids.begin(), bus_ids.end(), info.pci_bus_id);
    if (it == bus_ids.end()) {
      log("NVML GPU " + info.pci_bus_id + " is not in the hwloc topology: ignored");
      continue;
    }
    Gpu& gpu = gpus[static_cast<size_t>(it - bus_ids.begin())].gpu;
    if (!info.uuid.empty()) gpu.uuid = info.uuid;
    if (!info.model.empty()) gpu.model = info.model;
    if (info.memory_bytes) gpu.memory_bytes = info.memory_bytes;
    lanes.push_back(NvmlGpuLanes{info.pci_bus_id, info.lanes});
  }
  if (gpus.size() < 2 || !DistancesList(topology, kNvlinkMatrixName).matrices().empty()) return;
  std::vector<uint64_t> values = nvlink_bandwidth_matrix(bus_ids, lanes);
  if (std::all_of(values.begin(), values.end(), [](uint64_t v) { return v == 0; })) return;
  std::string error = add_nvlink_matrix(topology, pci_objects(gpus), std::move(values));
  if (!error.empty())
    log("cannot add the NVLink matrix to hwloc (" + error + "): links reported as 0");
}

}  // namespace

LoadResult load_from_xml(const std::string& path, const XmlOptions& options) {
  LogFn log = or_stderr(options.log);
  if (path.empty()) return failure("no topology XML path given");
  std::string error;
  // Keep every I/O object the file has: the matrix may refer to NVSwitches.
  HwlocTopology topology = load_hwloc(path, HWLOC_TYPE_FILTER_KEEP_ALL, error);
  if (!topology) return failure(error);
  std::vector<HwlocGpu> gpus = find_hwloc_gpus(topology.get());
  if (gpus.empty()) {
    return failure("topology XML '" + path + "' has no NVIDIA GPU (" + kNoGpuReason +
                   "; was it exported without I/O devices?)");
  }
  return LoadResult{assemble(topology.get(), path, gpus, log), ""};
}

LoadResult load_live(const LiveOptions& options) {
  LogFn log = or_stderr(options.log);
  std::string error;
  HwlocTopology topology = load_hwloc(options.hwloc_xml, HWLOC_TYPE_FILTER_KEEP_IMPORTANT, error);
  if (!topology) return failure(error);
  std::vector<HwlocGpu> gpus = find_hwloc_gpus(topology.get());
  if (gpus.empty()) {
    return failure(std::string("no NVIDIA GPU on this host (hwloc finds ") + kNoGpuReason + ")");
  }
  NvmlReport nvml = probe_nvml(options.nvml_library, log);
  if (nvml.available) merge_nvml(topology.get(), gpus, nvml, log);
  return LoadResult{assemble(topology.get(), "live", gpus, log), ""};
}

}  // namespace egpu::topo
