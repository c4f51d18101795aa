#include "core/topo/hwloc_gpus.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>

#include "core/topo/pci_bus_id.h"

namespace egpu::topo {
namespace {

constexpr unsigned kNvidiaVendorId = 0x10de;
constexpr unsigned kPciClassVga = 0x0300;
constexpr unsigned kPciClass3d = 0x0302;

bool is_nvidia_gpu(hwloc_obj_t pci) {
  const auto& attr = pci->attr->pcidev;
  return attr.vendor_id == kNvidiaVendorId &&
         (attr.class_id == kPciClassVga || attr.class_id == kPciClass3d);
}

PciAddress address_of(hwloc_obj_t pci) {
  const auto& attr = pci->attr->pcidev;
  return PciAddress{attr.domain, attr.bus, attr.dev, attr.func};
}

std::vector<int> bitmap_indices(hwloc_const_bitmap_t bitmap) {
  std::vector<int> indices;
  if (!bitmap) return indices;
  for (int i = hwloc_bitmap_first(bitmap); i >= 0; i = hwloc_bitmap_next(bitmap, i)) {
    indices.push_back(i);
  }
  return indices;
}

// Slurm counts cores; a topology without Core objects gets PUs instead.
hwloc_obj_type_t slurm_core_type(hwloc_topology_t topology) {
  return hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
}

std::vector<int> cores_within(hwloc_topology_t topology, hwloc_const_cpuset_t cpuset) {
  std::vector<int> cores;
  if (!cpuset) return cores;
  hwloc_obj_type_t type = slurm_core_type(topology);
  for (hwloc_obj_t core = hwloc_get_next_obj_by_type(topology, type, nullptr); core;
       core = hwloc_get_next_obj_by_type(topology, type, core)) {
    if (hwloc_bitmap_intersects(core->cpuset, cpuset)) {
      cores.push_back(static_cast<int>(core->logical_index));
    }
  }
  return cores;
}

std::string_view info(hwloc_obj_t obj, const char* name) {
  const char* value = hwloc_obj_get_info_by_name(obj, name);
  return value ? std::string_view(value) : std::string_view();
}

bool starts_with(const char* text, std::string_view prefix) {
  return text && std::string_view(text).starts_with(prefix);
}

// Model, UUID and memory from the OS devices hwloc's NVML/CUDA/OpenCL backends
// put under the PCI device (present in XML exported where those backends ran).
void read_os_device_infos(hwloc_obj_t pci, Gpu& gpu) {
  for (hwloc_obj_t child = pci->io_first_child; child; child = child->next_sibling) {
    if (child->type != HWLOC_OBJ_OS_DEVICE) continue;
    bool nvml = starts_with(child->name, "nvml");
    if (gpu.model.empty() || nvml) {
      std::string_view model = info(child, "GPUModel");
      if (!model.empty()) gpu.model = model;
    }
    if (gpu.uuid.empty()) gpu.uuid = info(child, "NVIDIAUUID");
    if (gpu.memory_bytes == 0) {
      // Both in KiB.
      std::string_view kib = info(child, "CUDAGlobalMemorySize");
      if (kib.empty()) kib = info(child, "OpenCLGlobalMemorySize");
      uint64_t value = 0;
      auto [end, ec] = std::from_chars(kib.data(), kib.data() + kib.size(), value);
      if (!kib.empty() && ec == std::errc() && end == kib.data() + kib.size()) {
        gpu.memory_bytes = value * 1024;
      }
    }
  }
}

std::string fallback_model(hwloc_obj_t pci) {
  std::string_view name = info(pci, "PCIDevice");
  if (!name.empty()) return std::string(name);
  char text[48];
  std::snprintf(text, sizeof text, "NVIDIA GPU [10de:%04x]",
                static_cast<unsigned>(pci->attr->pcidev.device_id));
  return text;
}

}  // namespace

std::vector<HwlocGpu> find_hwloc_gpus(hwloc_topology_t topology) {
  std::vector<hwloc_obj_t> pci_gpus;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci;
       pci = hwloc_get_next_pcidev(topology, pci)) {
    if (is_nvidia_gpu(pci)) pci_gpus.push_back(pci);
  }
  std::sort(pci_gpus.begin(), pci_gpus.end(),
            [](hwloc_obj_t a, hwloc_obj_t b) { return address_of(a) < address_of(b); });

  std::vector<HwlocGpu> gpus;
  for (hwloc_obj_t pci : pci_gpus) {
    Gpu gpu;
    gpu.index = static_cast<int>(gpus.size());
    gpu.pci_bus_id = format_pci_bus_id(address_of(pci));
    read_os_device_infos(pci, gpu);
    if (gpu.model.empty()) gpu.model = fallback_model(pci);
    // Locality: the first ancestor that is not an I/O object (a Package, or a
    // NUMA Group on AMD NPS>1 machines).
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topology, pci);
    if (local) {
      gpu.cpus = bitmap_indices(local->cpuset);
      gpu.numa_nodes = bitmap_indices(local->nodeset);
      gpu.cores = cores_within(topology, local->cpuset);
    }
    gpus.push_back(HwlocGpu{pci, std::move(gpu)});
  }
  return gpus;
}

SlurmCoreLayout slurm_core_layout(hwloc_topology_t topology) {
  SlurmCoreLayout layout;
  layout.core_count = hwloc_get_nbobjs_by_type(topology, slurm_core_type(topology));
  for (hwloc_obj_t package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, nullptr);
       package; package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, package)) {
    layout.socket_cores.push_back(cores_within(topology, package->cpuset));
  }
  if (layout.socket_cores.empty()) {
    // No Package objects: Slurm sees one socket holding every core.
    layout.socket_cores.push_back(
        cores_within(topology, hwloc_topology_get_topology_cpuset(topology)));
  }
  return layout;
}

}  // namespace egpu::topo
