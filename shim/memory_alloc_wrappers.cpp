// Allocation and free entry points: device, pitched, managed, stream-ordered
// and pool allocations, arrays (VMM: vmm_wrappers.cpp; graph memory:
// graph_wrappers.cpp). Host allocations are not accounted.
#include "shim/array_bytes.h"
#include "shim/capture_state.h"
#include "shim/memory_accounting.h"
#include "shim/no_cancel_scope.h"
#include "shim/pool_memory.h"

using egpu::shim::accounted_alloc;
using egpu::shim::accounted_free;
using egpu::shim::AllocationKind;
using egpu::shim::kCurrentDevice;
using egpu::shim::RealId;

namespace egpu::shim {
namespace {

template <typename T>
uint64_t key_of(T value) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(value));
}
uint64_t key_of(CUdeviceptr value) {
  return value;
}
uint64_t key_of(CUdeviceptr_v1 value) {
  return value;
}

// Pitched allocations: the pitch is known only after the driver chose it, so
// reserve for the widest pitch alignment first and settle on pitch x height.
template <typename Ptr, typename Size, typename RealAlloc, typename RealFree>
CUresult pitched_alloc(RealId id, Ptr* dptr, Size* pitch, Size width, Size height,
                       RealAlloc&& alloc, RealFree&& free_fn) noexcept {
  const NoCancelScope no_cancel;  // the driver may wait here (see NoCancelScope)
  constexpr uint64_t kMaxPitchAlignment = 512;
  ProcessState* s = process_state();
  note_call(id);
  if (s == nullptr || !s->usable()) return alloc();
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    GpuBinding* b = s->current_binding();
    if (b == nullptr || dptr == nullptr || pitch == nullptr) {
      called = true;
      return result = alloc();
    }
    const uint64_t widest = (static_cast<uint64_t>(width) + kMaxPitchAlignment - 1) /
                            kMaxPitchAlignment * kMaxPitchAlignment * static_cast<uint64_t>(height);
    Reservation r;
    if (reserve_memory(*s, *b, widest, &r) == Admission::kDenied) return CUDA_ERROR_OUT_OF_MEMORY;
    called = true;
    result = alloc();
    if (result != CUDA_SUCCESS) {
      cancel_reservation(r);
      return result;
    }
    if (!resize_reservation(&r, static_cast<uint64_t>(*pitch) * static_cast<uint64_t>(height))) {
      free_fn(*dptr);
      cancel_reservation(r);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember_allocation(*s, AllocationKind::kPointer, key_of(*dptr),
                        {r.bytes, r.ordinal, current_context_key()});
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a pitched allocation: passing it through");
    return called ? result : alloc();
  }
}

// A stream-ordered allocation or free into a capturing stream is a memory
// node of the graph: the graph pool accounts it (graph_memory.h).
bool into_capture(RealId id, CUstream stream, bool per_thread) noexcept {
  if (!capture_state().capturing(capture_key(stream, per_thread))) return false;
  note_call(id);
  return true;
}

// A stream-ordered allocation: counted as its pool's size (pool_memory.h),
// or as itself when the pool is unknown.
template <typename Alloc, typename KeyOf>
CUresult pooled_alloc(RealId id, CUmemoryPool pool, uint64_t bytes, Alloc&& alloc,
                      KeyOf&& key_of) noexcept {
  const NoCancelScope no_cancel;  // the driver may wait here (see NoCancelScope)
  PoolTicket ticket;
  switch (admit_pool_allocation(pool, bytes, &ticket)) {
    case PoolAdmission::kPassThrough:
      note_call(id);
      return alloc();
    case PoolAdmission::kPerPointer:
      return accounted_alloc(id, kCurrentDevice, bytes, AllocationKind::kPointer, alloc, key_of);
    case PoolAdmission::kDenied:
      note_call(id);
      return CUDA_ERROR_OUT_OF_MEMORY;
    case PoolAdmission::kAdmitted:
      break;
  }
  note_call(id);
  const CUresult rc = alloc();
  settle_pool_allocation(ticket, rc);
  return rc;
}

// A synchronous free of a device pointer: one the shim counted itself is
// released; one it did not may be a pool's, and the free synchronises, so
// the pools' charges follow. (A stream-ordered free changes no pool's size:
// the pool keeps the memory at least until a synchronisation.)
template <typename RealFree>
CUresult pointer_free(RealId id, uint64_t key, RealFree&& free_fn) noexcept {
  const NoCancelScope no_cancel;  // the driver may wait here (see NoCancelScope)
  const CUresult rc = accounted_free(id, AllocationKind::kPointer, key, free_fn);
  settle_mem_pools();
  return rc;
}

}  // namespace
}  // namespace egpu::shim

using egpu::shim::into_capture;
using egpu::shim::key_of;
using egpu::shim::pointer_free;
using egpu::shim::pooled_alloc;

extern "C" {

CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  EGPU_REAL_OR_RETURN(cuMemAlloc);
  return accounted_alloc(
      RealId::cuMemAlloc, kCurrentDevice, bytesize, AllocationKind::kPointer,
      [&] { return real(dptr, bytesize); }, [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  EGPU_REAL_OR_RETURN(cuMemAlloc_v2);
  return accounted_alloc(
      RealId::cuMemAlloc_v2, kCurrentDevice, bytesize, AllocationKind::kPointer,
      [&] { return real(dptr, bytesize); }, [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pPitch,
                                 unsigned int WidthInBytes, unsigned int Height,
                                 unsigned int ElementSizeBytes) {
  EGPU_REAL_OR_RETURN(cuMemAllocPitch);
  const auto free_fn = EGPU_REAL(cuMemFree);
  return egpu::shim::pitched_alloc(
      RealId::cuMemAllocPitch, dptr, pPitch, WidthInBytes, Height,
      [&] { return real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); },
      [&](CUdeviceptr_v1 p) {
        if (free_fn != nullptr) free_fn(p);
      });
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes) {
  EGPU_REAL_OR_RETURN(cuMemAllocPitch_v2);
  const auto free_fn = EGPU_REAL(cuMemFree_v2);
  return egpu::shim::pitched_alloc(
      RealId::cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height,
      [&] { return real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); },
      [&](CUdeviceptr p) {
        if (free_fn != nullptr) free_fn(p);
      });
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  EGPU_REAL_OR_RETURN(cuMemAllocManaged);
  return accounted_alloc(
      RealId::cuMemAllocManaged, kCurrentDevice, bytesize, AllocationKind::kPointer,
      [&] { return real(dptr, bytesize, flags); }, [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemAllocAsync);
  if (into_capture(RealId::cuMemAllocAsync, hStream, false)) return real(dptr, bytesize, hStream);
  return pooled_alloc(
      RealId::cuMemAllocAsync, nullptr, bytesize, [&] { return real(dptr, bytesize, hStream); },
      [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemAllocAsync_ptsz);
  if (into_capture(RealId::cuMemAllocAsync_ptsz, hStream, true))
    return real(dptr, bytesize, hStream);
  return pooled_alloc(
      RealId::cuMemAllocAsync_ptsz, nullptr, bytesize,
      [&] { return real(dptr, bytesize, hStream); }, [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemAllocFromPoolAsync);
  if (into_capture(RealId::cuMemAllocFromPoolAsync, hStream, false))
    return real(dptr, bytesize, pool, hStream);
  return pooled_alloc(
      RealId::cuMemAllocFromPoolAsync, pool, bytesize,
      [&] { return real(dptr, bytesize, pool, hStream); }, [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemAllocFromPoolAsync_ptsz);
  if (into_capture(RealId::cuMemAllocFromPoolAsync_ptsz, hStream, true))
    return real(dptr, bytesize, pool, hStream);
  return pooled_alloc(
      RealId::cuMemAllocFromPoolAsync_ptsz, pool, bytesize,
      [&] { return real(dptr, bytesize, pool, hStream); }, [&] { return key_of(*dptr); });
}

CUresult CUDAAPI cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray) {
  EGPU_REAL_OR_RETURN(cuArrayCreate);
  const uint64_t bytes = pAllocateArray ? egpu::shim::array_bytes(*pAllocateArray) : 0;
  return accounted_alloc(
      RealId::cuArrayCreate, kCurrentDevice, bytes, AllocationKind::kArray,
      [&] { return real(pHandle, pAllocateArray); }, [&] { return key_of(*pHandle); });
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  EGPU_REAL_OR_RETURN(cuArrayCreate_v2);
  const uint64_t bytes = pAllocateArray ? egpu::shim::array_bytes(*pAllocateArray) : 0;
  return accounted_alloc(
      RealId::cuArrayCreate_v2, kCurrentDevice, bytes, AllocationKind::kArray,
      [&] { return real(pHandle, pAllocateArray); }, [&] { return key_of(*pHandle); });
}

CUresult CUDAAPI cuArray3DCreate(CUarray* pHandle,
                                 const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray) {
  EGPU_REAL_OR_RETURN(cuArray3DCreate);
  const uint64_t bytes = pAllocateArray ? egpu::shim::array_bytes(*pAllocateArray) : 0;
  return accounted_alloc(
      RealId::cuArray3DCreate, kCurrentDevice, bytes, AllocationKind::kArray,
      [&] { return real(pHandle, pAllocateArray); }, [&] { return key_of(*pHandle); });
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle,
                                    const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  EGPU_REAL_OR_RETURN(cuArray3DCreate_v2);
  const uint64_t bytes = pAllocateArray ? egpu::shim::array_bytes(*pAllocateArray) : 0;
  return accounted_alloc(
      RealId::cuArray3DCreate_v2, kCurrentDevice, bytes, AllocationKind::kArray,
      [&] { return real(pHandle, pAllocateArray); }, [&] { return key_of(*pHandle); });
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                        const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels) {
  EGPU_REAL_OR_RETURN(cuMipmappedArrayCreate);
  const uint64_t bytes =
      pMipmappedArrayDesc ? egpu::shim::mipmapped_array_bytes(*pMipmappedArrayDesc, numMipmapLevels)
                          : 0;
  return accounted_alloc(
      RealId::cuMipmappedArrayCreate, kCurrentDevice, bytes, AllocationKind::kMipmappedArray,
      [&] { return real(pHandle, pMipmappedArrayDesc, numMipmapLevels); },
      [&] { return key_of(*pHandle); });
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  EGPU_REAL_OR_RETURN(cuArrayDestroy);
  return accounted_free(RealId::cuArrayDestroy, AllocationKind::kArray, key_of(hArray),
                        [&] { return real(hArray); });
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  EGPU_REAL_OR_RETURN(cuMipmappedArrayDestroy);
  return accounted_free(RealId::cuMipmappedArrayDestroy, AllocationKind::kMipmappedArray,
                        key_of(hMipmappedArray), [&] { return real(hMipmappedArray); });
}

CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr) {
  EGPU_REAL_OR_RETURN(cuMemFree);
  return pointer_free(RealId::cuMemFree, key_of(dptr), [&] { return real(dptr); });
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  EGPU_REAL_OR_RETURN(cuMemFree_v2);
  return pointer_free(RealId::cuMemFree_v2, key_of(dptr), [&] { return real(dptr); });
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemFreeAsync);
  if (into_capture(RealId::cuMemFreeAsync, hStream, false)) return real(dptr, hStream);
  return accounted_free(RealId::cuMemFreeAsync, AllocationKind::kPointer, key_of(dptr),
                        [&] { return real(dptr, hStream); });
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemFreeAsync_ptsz);
  if (into_capture(RealId::cuMemFreeAsync_ptsz, hStream, true)) return real(dptr, hStream);
  return accounted_free(RealId::cuMemFreeAsync_ptsz, AllocationKind::kPointer, key_of(dptr),
                        [&] { return real(dptr, hStream); });
}

}  // extern "C"
