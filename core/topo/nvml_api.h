// The few NVML declarations core/topo calls through dlopen(); no NVML header
// is packaged on Debian. Types and layouts follow NVIDIA's public nvml.h
// (nvmlPciInfo_t as used by the _v3/_v2 entry points since driver R410).
#ifndef EGPU_CORE_TOPO_NVML_API_H
#define EGPU_CORE_TOPO_NVML_API_H

namespace egpu::topo::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorInvalidArgument = 2;

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t

struct PciInfo {         // nvmlPciInfo_t
  char busIdLegacy[16];  // "dddd:bb:dd.f", NUL-terminated
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[32];  // "dddddddd:bb:dd.f", NUL-terminated
};
static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t layout");

struct Memory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

using EnableState = int;  // nvmlEnableState_t
inline constexpr EnableState kFeatureEnabled = 1;

using NvLinkDeviceType = int;  // nvmlIntNvLinkDeviceType_t
inline constexpr NvLinkDeviceType kNvLinkDeviceGpu = 0;
inline constexpr NvLinkDeviceType kNvLinkDeviceIbmNpu = 1;
inline constexpr NvLinkDeviceType kNvLinkDeviceSwitch = 2;

inline constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
// NVML_NVLINK_MAX_LINKS is 18 today; probe further and stop at INVALID_ARGUMENT.
inline constexpr unsigned kLinkProbeLimit = 32;

extern "C" {
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using DeviceGetCountFn = Return (*)(unsigned int* count);
using DeviceGetHandleByIndexFn = Return (*)(unsigned int index, Device* device);
using DeviceGetPciInfoFn = Return (*)(Device device, PciInfo* pci);
using DeviceGetUuidFn = Return (*)(Device device, char* uuid, unsigned int length);
using DeviceGetNameFn = Return (*)(Device device, char* name, unsigned int length);
using DeviceGetMemoryInfoFn = Return (*)(Device device, Memory* memory);
using DeviceGetNvLinkStateFn = Return (*)(Device device, unsigned int link, EnableState* active);
using DeviceGetNvLinkRemotePciInfoFn = Return (*)(Device device, unsigned int link, PciInfo* pci);
using DeviceGetNvLinkRemoteDeviceTypeFn = Return (*)(Device device, unsigned int link,
                                                     NvLinkDeviceType* type);
}

}  // namespace egpu::topo::nvml

#endif
