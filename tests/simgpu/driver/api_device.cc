// cuInit, versions and device queries.
#include "driver/cuda_api.h"
// after cuda.h:
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

#include "driver/device_attributes.h"
#include "driver/driver_state.h"
#include "model/device_identity.h"

using egpu::simgpu::driver::Driver;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::require_init;
using egpu::simgpu::driver::valid_device;

namespace {

uint64_t total_memory() {
  return Driver::get().config().memory_bytes;
}

uint32_t physical(CUdevice dev) {
  return Driver::get().physical_of(dev);
}

// Parses "[domain:]bus:device.function" (hex, any case) into the bus number.
bool parse_bus(const char* text, unsigned* bus) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  unsigned domain = 0;
  unsigned device = 0;
  unsigned function = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &domain, bus, &device, &function, &tail) == 4) {
    return true;
  }
  return std::sscanf(s.c_str(), "%x:%x.%x%c", bus, &device, &function, &tail) == 3;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  return guarded([&] {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    return Driver::get().initialise();
  });
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = Driver::get().visible_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const char* full = Driver::get().config().device_name;
  const size_t n =
      std::min(strnlen(full, egpu::simgpu::kDeviceNameBytes), static_cast<size_t>(len - 1));
  std::memcpy(name, full, n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const auto bytes =
      egpu::simgpu::uuid_bytes(physical(dev), Driver::get().config().pci_bus[physical(dev)]);
  std::memcpy(uuid->bytes, bytes.data(), bytes.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    const std::string id =
        egpu::simgpu::pci_bus_id_string(Driver::get().config().pci_bus[physical(dev)]);
    const size_t n = std::min(id.size(), static_cast<size_t>(len - 1));
    std::memcpy(pciBusId, id.data(), n);
    pciBusId[n] = '\0';
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    unsigned bus = 0;
    if (!parse_bus(pciBusId, &bus)) return CUDA_ERROR_INVALID_VALUE;
    const Driver& driver = Driver::get();
    for (int ordinal = 0; ordinal < driver.visible_count(); ++ordinal) {
      if (driver.config().pci_bus[driver.physical_of(ordinal)] == bus) {
        *dev = ordinal;
        return CUDA_SUCCESS;
      }
    }
    return CUDA_ERROR_INVALID_DEVICE;
  });
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = total_memory();
  return CUDA_SUCCESS;
}

// The pre-3.2 ABI with 32-bit sizes: clamped.
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  size_t full = 0;
  const CUresult rc = cuDeviceTotalMem_v2(bytes != nullptr ? &full : nullptr, dev);
  if (rc == CUDA_SUCCESS) *bytes = static_cast<unsigned int>(std::min<size_t>(full, UINT32_MAX));
  return rc;
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return egpu::simgpu::driver::device_attribute(attrib, physical(dev), pi)
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *major = 9;
  *minor = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *prop = CUdevprop{1024,
                    {1024, 1024, 64},
                    {2147483647, 65535, 65535},
                    49152,
                    65536,
                    32,
                    2147483647,
                    65536,
                    1980000,
                    512};
  return CUDA_SUCCESS;
}

// Every pair of simulated devices is NVLink/NVSwitch-connected.
CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev) || !valid_device(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = dev != peerDev ? 1 : 0;
  return CUDA_SUCCESS;
}

// cudart's private tables: a simulated driver has none.
CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  if (ppExportTable != nullptr) *ppExportTable = nullptr;
  (void)pExportTableId;
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // extern "C"
