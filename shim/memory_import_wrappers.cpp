// Memory another process exported, imported here: it stays allocated on the
// device while this process holds it (even after the exporter freed it), so
// it counts against the importer's quota. Its size is known only once the
// driver opened it: an import over quota is closed again and refused with
// CUDA_ERROR_OUT_OF_MEMORY. VMM imports are accounted by what is mapped from
// them (vmm_wrappers.cpp), their size being unknown to the driver API.
#include <mutex>
#include <unordered_map>

#include "shim/after_fork.h"
#include "shim/fork_renewed.h"
#include "shim/memory_accounting.h"
#include "shim/vmm_mappings.h"

namespace egpu::shim {
namespace {

// IPC pointers this process has open, with the driver's reference count: a
// context opening the same handle again gets the same pointer and one more
// reference, released by its own cuIpcCloseMemHandle. The memory is counted
// once, until the last close. The mutex spans the driver call, so two opens
// of one handle cannot both count it.
struct IpcOpens {
  std::mutex mu;
  std::unordered_map<CUdeviceptr, uint32_t> refs;
};

IpcOpens* make_ipc_opens() {
  return new IpcOpens();
}
// Never destroyed: used until exit.
constinit ForkRenewed<IpcOpens, &make_ipc_opens> g_ipc_opens;

IpcOpens& ipc_opens() {
  return g_ipc_opens.get();
}

// Accounts an imported pointer `*dptr` (already open) on the current device;
// `close` undoes the import when the quota refuses it.
// `*already_counted`, if given, is read after `open`: true skips accounting.
template <typename RealOpen, typename RealClose>
CUresult import_pointer(RealId id, CUdeviceptr* dptr, RealOpen&& open, RealClose&& close,
                        const bool* already_counted = nullptr) noexcept {
  ProcessState* s = managed_state();
  note_call(id);
  if (s == nullptr) return open();
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    called = true;
    result = open();
    if (already_counted != nullptr && *already_counted) return result;
    GpuBinding* b = s->current_binding();
    const auto range = EGPU_REAL(cuMemGetAddressRange_v2);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (result != CUDA_SUCCESS || b == nullptr || dptr == nullptr || range == nullptr ||
        range(&base, &size, *dptr) != CUDA_SUCCESS) {
      return result;
    }
    Reservation r;
    if (reserve_memory(*s, *b, size, &r) == Admission::kDenied) {
      close(*dptr);
      *dptr = 0;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember_allocation(*s, AllocationKind::kPointer, *dptr, {r.bytes, r.ordinal});
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a memory import: passing it through unaccounted");
    return called ? result : open();
  }
}

template <typename RealOpen>
CUresult open_ipc(RealId id, CUdeviceptr* pdptr, RealOpen&& real) noexcept {
  const auto close = EGPU_REAL(cuIpcCloseMemHandle);
  std::unique_lock<std::mutex> lock;
  try {
    lock = std::unique_lock(ipc_opens().mu);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuIpcOpenMemHandle: passing it through");
    return real();
  }
  bool reopened = false;
  const CUresult result = import_pointer(
      id, pdptr,
      [&] {
        const CUresult r = real();
        // A reference more to a pointer already counted: nothing to reserve.
        if (r == CUDA_SUCCESS && pdptr != nullptr) reopened = ipc_opens().refs.count(*pdptr) > 0;
        return r;
      },
      [&](CUdeviceptr p) {
        if (close != nullptr) close(p);
      },
      &reopened);
  if (result != CUDA_SUCCESS || pdptr == nullptr || managed_state() == nullptr) return result;
  try {
    ++ipc_opens().refs[*pdptr];
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuIpcOpenMemHandle: accounting may be off");
  }
  return result;
}

// Only the last close of a pointer gives its bytes back.
template <typename RealClose>
CUresult close_ipc(CUdeviceptr dptr, RealClose&& real) noexcept {
  std::unique_lock<std::mutex> lock;
  try {
    lock = std::unique_lock(ipc_opens().mu);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuIpcCloseMemHandle: passing it through");
    return real();
  }
  auto& refs = ipc_opens().refs;
  const auto it = refs.find(dptr);
  if (it != refs.end() && it->second > 1) {
    note_call(RealId::cuIpcCloseMemHandle);
    const CUresult result = real();
    if (result == CUDA_SUCCESS) --it->second;
    return result;
  }
  const CUresult result = accounted_free(RealId::cuIpcCloseMemHandle, AllocationKind::kPointer,
                                         dptr, [&] { return real(); });
  if (result == CUDA_SUCCESS && it != refs.end()) refs.erase(it);
  return result;
}

}  // namespace

void renew_ipc_opens_after_fork() noexcept {
  g_ipc_opens.renew();
}
}  // namespace egpu::shim

using egpu::shim::RealId;

extern "C" {

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  EGPU_REAL_OR_RETURN(cuIpcOpenMemHandle);
  return egpu::shim::open_ipc(RealId::cuIpcOpenMemHandle, pdptr,
                              [&] { return real(pdptr, handle, Flags); });
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                       unsigned int Flags) {
  EGPU_REAL_OR_RETURN(cuIpcOpenMemHandle_v2);
  return egpu::shim::open_ipc(RealId::cuIpcOpenMemHandle_v2, pdptr,
                              [&] { return real(pdptr, handle, Flags); });
}

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  EGPU_REAL_OR_RETURN(cuIpcCloseMemHandle);
  return egpu::shim::close_ipc(dptr, [&] { return real(dptr); });
}

// Freed like any pool allocation: cuMemFree / cuMemFreeAsync of the pointer.
CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool,
                                        CUmemPoolPtrExportData* shareData) {
  EGPU_REAL_OR_RETURN(cuMemPoolImportPointer);
  const auto free_fn = EGPU_REAL(cuMemFree_v2);
  return egpu::shim::import_pointer(
      RealId::cuMemPoolImportPointer, ptr_out, [&] { return real(ptr_out, pool, shareData); },
      [&](CUdeviceptr p) {
        if (free_fn != nullptr) free_fn(p);
      });
}

// The handle's size is unknown here: cuMemMap accounts what is mapped from it.
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                void* osHandle,
                                                CUmemAllocationHandleType shHandleType) {
  EGPU_REAL_OR_RETURN(cuMemImportFromShareableHandle);
  egpu::shim::ProcessState* s = egpu::shim::managed_state();
  egpu::shim::note_call(RealId::cuMemImportFromShareableHandle);
  const CUresult result = real(handle, osHandle, shHandleType);
  if (s == nullptr || result != CUDA_SUCCESS || handle == nullptr) return result;
  try {
    const auto props = EGPU_REAL(cuMemGetAllocationPropertiesFromHandle);
    CUmemAllocationProp prop{};
    if (props == nullptr || props(&prop, *handle) != CUDA_SUCCESS ||
        prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        s->binding(prop.location.id) == nullptr) {
      return result;
    }
    const uint64_t serial = s->vmm().add_handle(*handle, prop.location.id, 0, true);
    s->allocations().insert(egpu::shim::AllocationKind::kVmmHandle, serial,
                            egpu::shim::LiveAllocation{0, prop.location.id});
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuMemImportFromShareableHandle: accounting may be off");
  }
  return result;
}

}  // extern "C"
