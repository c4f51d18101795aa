// Device and host allocations, memory info and pointer attributes. Device
// allocations are accounted in the shared table (no backing store); host
// allocations are real memory and not device-accounted.
#include "driver/cuda_api.h"
// after cuda.h:
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "driver/contexts.h"
#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/graph_memory.h"
#include "driver/memory_accounting.h"
#include "driver/pool_cache.h"
#include "model/memory_table.h"

using egpu::simgpu::AllocationKind;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

constexpr size_t kPitchAlignment = 512;

// Host allocations of this process: pointer -> cuMemHostAlloc flags.
struct HostAllocations {
  std::mutex mutex;
  std::unordered_map<void*, unsigned int> flags;
};

HostAllocations& host_allocations() {
  static auto* instance = new HostAllocations();  // never destroyed: used until exit
  return *instance;
}

CUresult device_alloc(CUdeviceptr* dptr, size_t bytes, AllocationKind kind) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  uint64_t address = 0;
  const CUresult rc = drv::account_allocation(ctx, bytes, kind, &address);
  if (rc == CUDA_SUCCESS) *dptr = address;
  return rc;
}

CUresult host_alloc(void** pp, size_t bytes, unsigned int flags) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (pp == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const size_t rounded = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  HostAllocations& host = host_allocations();
  const std::lock_guard lock(host.mutex);
  host.flags[p] = flags;
  *pp = p;
  return CUDA_SUCCESS;
}

bool is_host_allocation(const void* p, unsigned int* flags) {
  HostAllocations& host = host_allocations();
  const std::lock_guard lock(host.mutex);
  const auto it = host.flags.find(const_cast<void*>(p));
  if (it == host.flags.end()) return false;
  if (flags != nullptr) *flags = it->second;
  return true;
}

CUresult memory_info(size_t* free_bytes, size_t* total_bytes) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  // Forced liveness sweep: memory of processes that died is free at once.
  return drv::with_device(ctx->physical, true, [&](egpu::simgpu::DeviceShared& dev, uint64_t) {
    *free_bytes = egpu::simgpu::free_bytes(dev.memory);
    *total_bytes = dev.memory.total_bytes;
    return CUDA_SUCCESS;
  });
}

template <class T>
void put(void* data, T value) {
  std::memcpy(data, &value, sizeof value);
}

CUresult host_pointer_attribute(void* data, CUpointer_attribute attribute, void* p) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      put<unsigned int>(data, CU_MEMORYTYPE_HOST);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      put<void*>(data, p);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      put<CUdeviceptr>(data, reinterpret_cast<CUdeviceptr>(p));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      put<unsigned int>(data, 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      put<unsigned int>(data, 1);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult pointer_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* host = reinterpret_cast<void*>(ptr);
  if (is_host_allocation(host, nullptr)) return host_pointer_attribute(data, attribute, host);
  egpu::simgpu::Allocation a{};
  uint32_t physical = 0;
  if (!drv::lookup_allocation(ptr, &a, &physical)) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      put<CUcontext>(data, drv::find_context(physical, static_cast<uint32_t>(a.owner_slot),
                                             a.owner_generation));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      put<unsigned int>(data, CU_MEMORYTYPE_DEVICE);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      put<CUdeviceptr>(data, ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      put<unsigned int>(data, a.kind == static_cast<uint32_t>(AllocationKind::kManaged));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      put<int>(data, drv::Driver::get().ordinal_of(physical));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      put<CUdeviceptr>(data, a.address);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      put<size_t>(data, a.size);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      put<unsigned int>(data, 1);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      put<unsigned long long>(data, a.address);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      put<unsigned int>(data, 1);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return guarded([&] { return device_alloc(dptr, bytesize, AllocationKind::kDevice); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  return guarded([&] {
    if (pPitch == nullptr || WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const size_t pitch = (WidthInBytes + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    const CUresult rc = device_alloc(dptr, pitch * Height, AllocationKind::kPitch);
    if (rc == CUDA_SUCCESS) *pPitch = pitch;
    return rc;
  });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  (void)flags;
  return guarded([&] { return device_alloc(dptr, bytesize, AllocationKind::kManaged); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (dptr == 0) return CUDA_SUCCESS;
    if (CUresult rc = CUDA_SUCCESS;
        drv::free_graph_allocation(dptr, &rc) || drv::pool_free(dptr, &rc)) {
      return rc;
    }
    return drv::release_allocation(dptr);
  });
}

// The pre-3.2 ABI with 32-bit device pointers cannot address simulated
// memory (which lives above 2^40).
CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  (void)dptr;
  (void)bytesize;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes) {
  (void)dptr, (void)pPitch, (void)WidthInBytes, (void)Height, (void)ElementSizeBytes;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  (void)dptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  return guarded([&] { return memory_info(free, total); });
}

CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  return guarded([&] {
    if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
    size_t f = 0;
    size_t t = 0;
    const CUresult rc = memory_info(&f, &t);
    if (rc == CUDA_SUCCESS) {
      *free = static_cast<unsigned int>(std::min<size_t>(f, UINT32_MAX));
      *total = static_cast<unsigned int>(std::min<size_t>(t, UINT32_MAX));
    }
    return rc;
  });
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    egpu::simgpu::Allocation a{};
    uint32_t physical = 0;
    if (!drv::lookup_allocation(dptr, &a, &physical)) return CUDA_ERROR_NOT_FOUND;
    if (pbase != nullptr) *pbase = a.address;
    if (psize != nullptr) *psize = a.size;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return guarded([&] { return host_alloc(pp, bytesize, 0); });
}

CUresult cuMemAllocHost(void** pp, unsigned int bytesize) {
  return guarded([&] { return host_alloc(pp, bytesize, 0); });
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  return guarded([&] { return host_alloc(pp, bytesize, Flags); });
}

CUresult cuMemFreeHost(void* p) {
  return guarded([&] {
    HostAllocations& host = host_allocations();
    {
      const std::lock_guard lock(host.mutex);
      if (host.flags.erase(p) == 0) return CUDA_ERROR_INVALID_VALUE;
    }
    std::free(p);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  return guarded([&] {
    if (pdptr == nullptr || Flags != 0 || !is_host_allocation(p, nullptr)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *pdptr = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  return guarded([&] {
    if (pFlags == nullptr || !is_host_allocation(p, pFlags)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  (void)Flags;
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  return require_init();
}

CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return require_init();
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  return guarded([&] { return pointer_attribute(data, attribute, ptr); });
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                void** data, CUdeviceptr ptr) {
  return guarded([&] {
    if (attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < numAttributes; ++i) {
      if (data[i] == nullptr) continue;
      const CUresult rc = pointer_attribute(data[i], attributes[i], ptr);
      if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_SUPPORTED) return rc;
    }
    return CUDA_SUCCESS;
  });
}

}  // extern "C"
