#include "core/topo/nvml_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/topo/nvml_api.h"
#include "core/topo/pci_bus_id.h"

namespace egpu::topo {
namespace {

struct DlCloser {
  void operator()(void* handle) const { dlclose(handle); }
};
using DlHandle = std::unique_ptr<void, DlCloser>;

struct NvmlEntryPoints {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;  // optional
  nvml::DeviceGetCountFn get_count = nullptr;
  nvml::DeviceGetHandleByIndexFn get_handle = nullptr;
  nvml::DeviceGetPciInfoFn get_pci_info = nullptr;
  nvml::DeviceGetUuidFn get_uuid = nullptr;                            // optional
  nvml::DeviceGetNameFn get_name = nullptr;                            // optional
  nvml::DeviceGetMemoryInfoFn get_memory = nullptr;                    // optional
  nvml::DeviceGetNvLinkStateFn link_state = nullptr;                   // optional: no links
  nvml::DeviceGetNvLinkRemotePciInfoFn link_remote_pci = nullptr;      // optional: no links
  nvml::DeviceGetNvLinkRemoteDeviceTypeFn link_remote_type = nullptr;  // optional
};

template <class Fn>
void resolve(void* library, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, name));
}

NvmlEntryPoints resolve_entry_points(void* library) {
  NvmlEntryPoints nvml;
  resolve(library, "nvmlInit_v2", nvml.init);
  resolve(library, "nvmlShutdown", nvml.shutdown);
  resolve(library, "nvmlErrorString", nvml.error_string);
  resolve(library, "nvmlDeviceGetCount_v2", nvml.get_count);
  resolve(library, "nvmlDeviceGetHandleByIndex_v2", nvml.get_handle);
  resolve(library, "nvmlDeviceGetPciInfo_v3", nvml.get_pci_info);
  resolve(library, "nvmlDeviceGetUUID", nvml.get_uuid);
  resolve(library, "nvmlDeviceGetName", nvml.get_name);
  resolve(library, "nvmlDeviceGetMemoryInfo", nvml.get_memory);
  resolve(library, "nvmlDeviceGetNvLinkState", nvml.link_state);
  resolve(library, "nvmlDeviceGetNvLinkRemotePciInfo_v2", nvml.link_remote_pci);
  resolve(library, "nvmlDeviceGetNvLinkRemoteDeviceType", nvml.link_remote_type);
  return nvml;
}

// nvmlShutdown() for every successful nvmlInit().
class NvmlSession {
 public:
  explicit NvmlSession(nvml::ShutdownFn shutdown) : shutdown_(shutdown) {}
  ~NvmlSession() { shutdown_(); }
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

 private:
  nvml::ShutdownFn shutdown_;
};

std::string error_text(const NvmlEntryPoints& nvml, nvml::Return rc) {
  const char* text = nvml.error_string ? nvml.error_string(rc) : nullptr;
  return (text ? std::string(text) : std::string("NVML error")) + " (" + std::to_string(rc) + ")";
}

std::string fixed_string(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

// NVML's own spelling first; the numeric fields when busId is empty or odd.
std::string bus_id_of(const nvml::PciInfo& pci) {
  if (auto id = normalize_pci_bus_id(fixed_string(pci.busId, sizeof pci.busId))) return *id;
  if (auto id = normalize_pci_bus_id(fixed_string(pci.busIdLegacy, sizeof pci.busIdLegacy))) {
    return *id;
  }
  return format_pci_bus_id(
      PciAddress{pci.domain, static_cast<uint8_t>(pci.bus), static_cast<uint8_t>(pci.device), 0});
}

constexpr unsigned kNvidiaVendorId = 0x10de;

struct RawLane {
  nvml::PciInfo remote;
  bool type_known;
  nvml::NvLinkDeviceType type;
};

std::vector<RawLane> active_lanes(const NvmlEntryPoints& nvml, nvml::Device device) {
  std::vector<RawLane> lanes;
  if (!nvml.link_state || !nvml.link_remote_pci) return lanes;
  for (unsigned link = 0; link < nvml::kLinkProbeLimit; ++link) {
    nvml::EnableState active = 0;
    nvml::Return rc = nvml.link_state(device, link, &active);
    if (rc == nvml::kErrorInvalidArgument) break;  // past the last link
    if (rc != nvml::kSuccess || active != nvml::kFeatureEnabled) continue;
    RawLane lane{};
    if (nvml.link_remote_pci(device, link, &lane.remote) != nvml::kSuccess) continue;
    lane.type_known =
        nvml.link_remote_type && nvml.link_remote_type(device, link, &lane.type) == nvml::kSuccess;
    lanes.push_back(lane);
  }
  return lanes;
}

// NVML's device type when the driver has the call; else: a known GPU's bus id
// is a GPU, another NVIDIA device is a switch, anything else (IBM NPU) is not.
LaneRemote classify(const RawLane& lane, const std::vector<NvmlGpuInfo>& gpus) {
  if (lane.type_known) {
    if (lane.type == nvml::kNvLinkDeviceGpu) return LaneRemote::kGpu;
    if (lane.type == nvml::kNvLinkDeviceSwitch) return LaneRemote::kSwitch;
    return LaneRemote::kOther;
  }
  std::string bus_id = bus_id_of(lane.remote);
  bool is_gpu = std::any_of(gpus.begin(), gpus.end(),
                            [&](const NvmlGpuInfo& gpu) { return gpu.pci_bus_id == bus_id; });
  if (is_gpu) return LaneRemote::kGpu;
  return (lane.remote.pciDeviceId & 0xffff) == kNvidiaVendorId ? LaneRemote::kSwitch
                                                               : LaneRemote::kOther;
}

NvmlGpuInfo describe_device(const NvmlEntryPoints& nvml, nvml::Device device) {
  NvmlGpuInfo info;
  nvml::PciInfo pci{};
  if (nvml.get_pci_info(device, &pci) == nvml::kSuccess) info.pci_bus_id = bus_id_of(pci);
  char text[nvml::kUuidBufferSize > nvml::kNameBufferSize ? nvml::kUuidBufferSize
                                                          : nvml::kNameBufferSize] = {};
  if (nvml.get_uuid && nvml.get_uuid(device, text, sizeof text) == nvml::kSuccess) {
    info.uuid = fixed_string(text, sizeof text);
  }
  if (nvml.get_name && nvml.get_name(device, text, sizeof text) == nvml::kSuccess) {
    info.model = fixed_string(text, sizeof text);
  }
  nvml::Memory memory{};
  if (nvml.get_memory && nvml.get_memory(device, &memory) == nvml::kSuccess) {
    info.memory_bytes = memory.total;
  }
  return info;
}

}  // namespace

NvmlReport probe_nvml(const std::string& library, const LogFn& log) {
  NvmlReport report;
  DlHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) {
    const char* why = dlerror();
    log("NVML not available (" + std::string(why ? why : library) +
        "): no NVLink information, links reported as 0");
    return report;
  }
  NvmlEntryPoints nvml = resolve_entry_points(handle.get());
  if (!nvml.init || !nvml.shutdown || !nvml.get_count || !nvml.get_handle || !nvml.get_pci_info) {
    log(library +
        " lacks nvmlInit_v2/nvmlDeviceGetPciInfo_v3 (driver too old?): no NVLink "
        "information, links reported as 0");
    return report;
  }
  nvml::Return rc = nvml.init();
  if (rc != nvml::kSuccess) {
    log("nvmlInit_v2 failed: " + error_text(nvml, rc) +
        ": no NVLink information, links reported as 0");
    return report;
  }
  NvmlSession session(nvml.shutdown);
  report.available = true;
  if (!nvml.link_state || !nvml.link_remote_pci) {
    log(library + " has no NVLink queries: links reported as 0");
  }

  unsigned count = 0;
  if ((rc = nvml.get_count(&count)) != nvml::kSuccess) {
    log("nvmlDeviceGetCount_v2 failed: " + error_text(nvml, rc));
    return report;
  }
  std::vector<std::vector<RawLane>> raw_lanes;
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    if ((rc = nvml.get_handle(i, &device)) != nvml::kSuccess) {
      log("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) +
          ") failed: " + error_text(nvml, rc));
      continue;
    }
    report.gpus.push_back(describe_device(nvml, device));
    raw_lanes.push_back(active_lanes(nvml, device));
  }
  // Classify once every GPU's bus id is known (the fallback matches against them).
  for (size_t i = 0; i < report.gpus.size(); ++i) {
    for (const RawLane& lane : raw_lanes[i]) {
      report.gpus[i].lanes.push_back(
          NvlinkLane{classify(lane, report.gpus), bus_id_of(lane.remote)});
    }
  }
  return report;
}

}  // namespace egpu::topo
