// A stand-in libnvidia-ml for core/topo's tests: the NVML entry points
// core/topo calls, answering for an emulated DGX H100 (every GPU 18 lanes to 4
// NVSwitches), a V100 hybrid cube mesh (direct lanes) or V100s on one switch,
// chosen by EGPU_FAKE_NVML_SCENARIO at nvmlInit_v2. It is the external dependency faked,
// not the code under test.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/topo/nvml_api.h"

namespace nvml = egpu::topo::nvml;

namespace {

constexpr nvml::Return kErrorUninitialized = 1;
constexpr nvml::Return kErrorNotSupported = 3;
constexpr nvml::Return kErrorDriverNotLoaded = 9;
constexpr unsigned kMaxLinks = 18;
constexpr unsigned kNvidia = 0x10de;
constexpr unsigned kIbm = 0x1014;

struct FakeLane {
  nvml::NvLinkDeviceType type;
  std::string remote_bus;  // NVML spelling, "00000000:1B:00.0"
  unsigned remote_vendor;
};

struct FakeGpu {
  std::string bus;
  std::string uuid;
  std::string name;
  unsigned long long memory;
  std::vector<FakeLane> lanes;
};

std::vector<FakeGpu> g_gpus;
bool g_remote_type_supported = true;
int g_open_sessions = 0;

std::string nvml_bus(const char* short_bus) {
  return std::string("00000000:") + short_bus;
}

void build_h100_nvswitch() {
  const char* buses[] = {"1B:00.0", "43:00.0", "52:00.0", "61:00.0",
                         "9D:00.0", "C3:00.0", "D1:00.0", "DF:00.0"};
  // Lanes per switch as on an HGX H100 baseboard: 5 + 4 + 4 + 5 = 18.
  const std::pair<const char*, int> switches[] = {
      {"05:00.0", 5}, {"06:00.0", 4}, {"85:00.0", 4}, {"86:00.0", 5}};
  for (int i = 0; i < 8; ++i) {
    FakeGpu gpu{nvml_bus(buses[i]),
                "GPU-fa4e0000-0000-4000-8000-00000000000" + std::to_string(i),
                "NVIDIA H100 80GB HBM3",
                85520809984ULL,
                {}};
    for (const auto& [bus, lanes] : switches) {
      for (int l = 0; l < lanes; ++l) {
        gpu.lanes.push_back({nvml::kNvLinkDeviceSwitch, nvml_bus(bus), kNvidia});
      }
    }
    g_gpus.push_back(gpu);
  }
}

const char* const kV100Buses[] = {"06:00.0", "07:00.0", "0A:00.0", "0B:00.0",
                                  "85:00.0", "86:00.0", "89:00.0", "8A:00.0"};

// The V100 boxes' bus ids, but every GPU's 6 lanes on one NVSwitch.
void build_v100_switched() {
  for (int i = 0; i < 8; ++i) {
    FakeGpu gpu{nvml_bus(kV100Buses[i]),
                "GPU-fa4e0200-0000-4000-8000-00000000000" + std::to_string(i),
                "Tesla V100-SXM3-32GB",
                34359738368ULL,
                {}};
    for (int l = 0; l < 6; ++l)
      gpu.lanes.push_back({nvml::kNvLinkDeviceSwitch, nvml_bus("C0:00.0"), kNvidia});
    g_gpus.push_back(gpu);
  }
}

void build_v100_cubemesh8() {
  const char* const* buses = kV100Buses;
  // DGX-1V hybrid cube mesh: (gpu, gpu, lanes).
  const int pairs[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1},
                          {1, 5, 2}, {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1},
                          {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  std::vector<FakeGpu> gpus;
  for (int i = 0; i < 8; ++i) {
    gpus.push_back({nvml_bus(buses[i]),
                    "GPU-fa4e0100-0000-4000-8000-00000000000" + std::to_string(i),
                    "Tesla V100-SXM2-32GB",
                    34359738368ULL,
                    {}});
  }
  for (const auto& pair : pairs) {
    for (int l = 0; l < pair[2]; ++l) {
      gpus[pair[0]].lanes.push_back({nvml::kNvLinkDeviceGpu, gpus[pair[1]].bus, kNvidia});
      gpus[pair[1]].lanes.push_back({nvml::kNvLinkDeviceGpu, gpus[pair[0]].bus, kNvidia});
    }
  }
  // A lane to a CPU (as on POWER9): not a path between GPUs.
  gpus[0].lanes.push_back({nvml::kNvLinkDeviceIbmNpu, "00000000:00:01.0", kIbm});
  // NVML enumerates in PCI order; reversed here so matching must go by bus id.
  g_gpus.assign(gpus.rbegin(), gpus.rend());
}

const FakeGpu* gpu_of(nvml::Device device) {
  return reinterpret_cast<const FakeGpu*>(device);
}

void fill_pci(const std::string& bus, unsigned vendor, nvml::PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", bus.c_str() + 4);
  unsigned bus_number = 0, device = 0;
  std::sscanf(bus.c_str() + 9, "%x:%x", &bus_number, &device);
  pci->bus = bus_number;
  pci->device = device;
  pci->pciDeviceId = 0x2330u << 16 | vendor;
}

const FakeLane* lane_of(nvml::Device device, unsigned link) {
  const FakeGpu* gpu = gpu_of(device);
  return link < gpu->lanes.size() ? &gpu->lanes[link] : nullptr;
}

}  // namespace

extern "C" {

// Test hook: nvmlInit_v2 calls not yet matched by nvmlShutdown.
int fake_nvml_open_sessions() {
  return g_open_sessions;
}

nvml::Return nvmlInit_v2() {
  const char* scenario = std::getenv("EGPU_FAKE_NVML_SCENARIO");
  const char* no_type = std::getenv("EGPU_FAKE_NVML_NO_REMOTE_TYPE");
  g_gpus.clear();
  g_remote_type_supported = !(no_type && std::strcmp(no_type, "1") == 0);
  if (!scenario || std::strcmp(scenario, "init-fails") == 0) return kErrorDriverNotLoaded;
  if (std::strcmp(scenario, "h100-nvswitch") == 0) build_h100_nvswitch();
  if (std::strcmp(scenario, "v100-cubemesh8") == 0) build_v100_cubemesh8();
  if (std::strcmp(scenario, "v100-switched") == 0) build_v100_switched();
  ++g_open_sessions;
  return nvml::kSuccess;
}

nvml::Return nvmlShutdown() {
  if (g_open_sessions == 0) return kErrorUninitialized;
  --g_open_sessions;
  return nvml::kSuccess;
}

const char* nvmlErrorString(nvml::Return rc) {
  return rc == kErrorDriverNotLoaded ? "Driver Not Loaded" : "Unknown Error";
}

nvml::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned>(g_gpus.size());
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml::Device* device) {
  if (index >= g_gpus.size()) return nvml::kErrorInvalidArgument;
  *device = reinterpret_cast<nvml::Device>(&g_gpus[index]);
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetPciInfo_v3(nvml::Device device, nvml::PciInfo* pci) {
  fill_pci(gpu_of(device)->bus, kNvidia, pci);
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetUUID(nvml::Device device, char* uuid, unsigned int length) {
  std::snprintf(uuid, length, "%s", gpu_of(device)->uuid.c_str());
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetName(nvml::Device device, char* name, unsigned int length) {
  std::snprintf(name, length, "%s", gpu_of(device)->name.c_str());
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetMemoryInfo(nvml::Device device, nvml::Memory* memory) {
  memory->total = gpu_of(device)->memory;
  memory->used = 0;
  memory->free = memory->total;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetNvLinkState(nvml::Device device, unsigned int link,
                                      nvml::EnableState* active) {
  if (link >= kMaxLinks) return nvml::kErrorInvalidArgument;
  *active = lane_of(device, link) ? nvml::kFeatureEnabled : 0;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml::Device device, unsigned int link,
                                                 nvml::PciInfo* pci) {
  const FakeLane* lane = lane_of(device, link);
  if (!lane) return kErrorNotSupported;
  fill_pci(lane->remote_bus, lane->remote_vendor, pci);
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetNvLinkRemoteDeviceType(nvml::Device device, unsigned int link,
                                                 nvml::NvLinkDeviceType* type) {
  const FakeLane* lane = lane_of(device, link);
  if (!lane || !g_remote_type_supported) return kErrorNotSupported;
  *type = lane->type;
  return nvml::kSuccess;
}

}  // extern "C"
