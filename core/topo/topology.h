// The node's GPUs as Slurm needs them: locality (gres.conf Cores=) and NVLink
// link counts (Links=), loaded from hwloc (live or XML) and, on live hosts, NVML.
#ifndef EGPU_CORE_TOPO_TOPOLOGY_H
#define EGPU_CORE_TOPO_TOPOLOGY_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace egpu::topo {

struct Gpu {
  int index = 0;                // position in PCI bus order = NVML index = /dev/nvidia<index>
  std::string pci_bus_id;       // "0000:1b:00.0"
  std::string uuid;             // "GPU-..."; "" when unknown
  std::string model;            // "NVIDIA H100 80GB HBM3"
  uint64_t memory_bytes = 0;    // 0 = unknown
  std::vector<int> cpus;        // OS indices of the PUs local to the GPU
  std::vector<int> cores;       // Slurm core indices (hwloc logical Core order) for Cores=
  std::vector<int> numa_nodes;  // OS indices of the NUMA nodes local to the GPU
  std::vector<int> links;       // link count to each GPU by index, -1 for itself
};

struct Topology {
  std::string source;     // the XML path, or "live"
  std::vector<Gpu> gpus;  // PCI bus order
  // Slurm core indices of each socket (hwloc Package, logical order); lets
  // callers widen a GPU's cores to whole sockets, as Slurm's Cores= wants by default.
  std::vector<std::vector<int>> socket_cores;
  int core_count = 0;       // cores Slurm sees on the node
  bool has_nvlink = false;  // an NVLinkBandwidth matrix was found or built
};

// One line per call, no trailing newline. Empty: lines go to stderr.
using LogFn = std::function<void(std::string_view line)>;

struct LiveOptions {
  // dlopen()ed for NVLink, UUIDs and memory sizes; absent -> no links, one log line.
  std::string nvml_library = "libnvidia-ml.so.1";
  // Read hwloc from this XML instead of probing the hardware, NVML still live:
  // how tests and simulated nodes stand in for a real host. Empty: the hardware.
  std::string hwloc_xml;
  LogFn log;
};

struct XmlOptions {
  LogFn log;
};

// A topology, or what went wrong (which file, what was wrong with it).
struct LoadResult {
  std::optional<Topology> topology;
  std::string error;

  bool ok() const { return topology.has_value(); }
};

LoadResult load_from_xml(const std::string& path, const XmlOptions& options = {});
LoadResult load_live(const LiveOptions& options = {});

}  // namespace egpu::topo

#endif
