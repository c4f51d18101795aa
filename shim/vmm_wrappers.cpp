// Virtual memory management: cuMemCreate reserves the bytes, and they stay
// accounted until the driver frees the physical memory, i.e. at the last of
// cuMemRelease (of every reference) and cuMemUnmap (of every range): the
// create -> map -> release idiom keeps its memory. Imported handles
// (cuMemImportFromShareableHandle) are accounted by what gets mapped from them.
#include "shim/memory_accounting.h"
#include "shim/vmm_mappings.h"

namespace egpu::shim {
namespace {

// Pinned host memory made with cuMemCreate (NCCL's proxy buffers, cuMem
// host allocations): no GPU's memory, so no quota counts it.
bool host_memory(const CUmemAllocationProp* prop) {
  return prop != nullptr && (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
                             prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                             prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
}

int device_of(const CUmemAllocationProp* prop) {
  if (prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    return prop->location.id;
  }
  return kCurrentDevice;
}

// The driver freed these allocations: their bytes go back to the quota.
void release_dead(ProcessState& s, const VmmMappings::Pending& p) {
  for (const VmmMappings::Physical& d : p.dead) {
    if (auto freed = s.allocations().take(AllocationKind::kVmmHandle, d.serial)) {
      release_allocation(s, *freed);
    }
  }
}

template <typename RealCreate>
CUresult create(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                RealCreate&& real) noexcept {
  ProcessState* s = managed_state();
  note_call(RealId::cuMemCreate);
  if (s == nullptr || host_memory(prop)) return real();
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    const int ordinal = device_of(prop);
    GpuBinding* b = ordinal == kCurrentDevice ? s->current_binding() : s->binding(ordinal);
    if (b == nullptr || handle == nullptr) {
      called = true;
      return result = real();
    }
    Reservation r;
    if (reserve_memory(*s, *b, size, &r) == Admission::kDenied) return CUDA_ERROR_OUT_OF_MEMORY;
    called = true;
    result = real();
    if (result != CUDA_SUCCESS) {
      cancel_reservation(r);
      return result;
    }
    const uint64_t serial = s->vmm().add_handle(*handle, r.ordinal, r.bytes, false);
    s->allocations().insert(AllocationKind::kVmmHandle, serial, LiveAllocation{r.bytes, r.ordinal});
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuMemCreate: passing it through unaccounted");
    return called ? result : real();
  }
}

// cuMemRelease and cuMemUnmap: the ledger changes first (so a handle value
// the driver reuses at once never meets a stale entry), undone on failure.
template <typename Begin, typename RealCall>
CUresult drop(RealId id, Begin&& begin, RealCall&& real) noexcept {
  ProcessState* s = managed_state();
  note_call(id);
  if (s == nullptr) return real();
  std::optional<VmmMappings::Pending> pending;
  try {
    pending = begin(s->vmm());
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a VMM release path: passing it through");
  }
  const CUresult result = real();
  if (!pending) return result;
  try {
    if (result != CUDA_SUCCESS) {
      s->vmm().undo(*pending);
    } else {
      release_dead(*s, *pending);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a VMM release path: accounting may be off");
  }
  return result;
}

template <typename RealMap>
CUresult map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
             RealMap&& real) noexcept {
  ProcessState* s = managed_state();
  note_call(RealId::cuMemMap);
  if (s == nullptr) return real();
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    const auto physical = s->vmm().find_handle(handle);
    if (!physical) {
      called = true;
      return result = real();
    }
    // An import's size is unknown to the shim: what is mapped from it is
    // at least that much of the exporter's memory kept alive here.
    const uint64_t extent = static_cast<uint64_t>(offset) + size;
    Reservation r;
    if (physical->imported && extent > physical->bytes) {
      GpuBinding* b = s->binding(physical->ordinal);
      if (b != nullptr &&
          reserve_memory(*s, *b, extent - physical->bytes, &r) == Admission::kDenied) {
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    called = true;
    result = real();
    if (result != CUDA_SUCCESS) {
      cancel_reservation(r);
      return result;
    }
    const uint64_t grown = s->vmm().add_mapping(physical->serial, ptr, size, extent);
    if (grown < r.bytes) {  // another thread grew it meanwhile
      Reservation excess = r;
      excess.bytes = r.bytes - grown;
      cancel_reservation(excess);
    }
    if (grown > 0) {
      auto entry = s->allocations().take(AllocationKind::kVmmHandle, physical->serial);
      LiveAllocation updated = entry.value_or(LiveAllocation{0, physical->ordinal});
      updated.bytes += grown;
      s->allocations().insert(AllocationKind::kVmmHandle, physical->serial, updated);
    }
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuMemMap: passing it through");
    return called ? result : real();
  }
}

}  // namespace
}  // namespace egpu::shim

using egpu::shim::RealId;
using egpu::shim::VmmMappings;

extern "C" {

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                             const CUmemAllocationProp* prop, unsigned long long flags) {
  EGPU_REAL_OR_RETURN(cuMemCreate);
  return egpu::shim::create(handle, size, prop, [&] { return real(handle, size, prop, flags); });
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  EGPU_REAL_OR_RETURN(cuMemRelease);
  return egpu::shim::drop(
      RealId::cuMemRelease, [&](VmmMappings& v) { return v.begin_release(handle); },
      [&] { return real(handle); });
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  EGPU_REAL_OR_RETURN(cuMemMap);
  return egpu::shim::map(ptr, size, offset, handle,
                         [&] { return real(ptr, size, offset, handle, flags); });
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  EGPU_REAL_OR_RETURN(cuMemUnmap);
  return egpu::shim::drop(
      RealId::cuMemUnmap, [&](VmmMappings& v) { return v.begin_unmap(ptr, size); },
      [&] { return real(ptr, size); });
}

// Each retained handle is one more reference that needs its own cuMemRelease.
CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  EGPU_REAL_OR_RETURN(cuMemRetainAllocationHandle);
  egpu::shim::ProcessState* s = egpu::shim::managed_state();
  egpu::shim::note_call(RealId::cuMemRetainAllocationHandle);
  const CUresult result = real(handle, addr);
  if (s == nullptr || result != CUDA_SUCCESS || handle == nullptr) return result;
  try {
    s->vmm().retain(*handle, reinterpret_cast<uintptr_t>(addr));
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuMemRetainAllocationHandle: accounting may be off");
  }
  return result;
}

}  // extern "C"
