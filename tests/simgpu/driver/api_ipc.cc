// CUDA IPC memory handles. A handle names the exporter's allocation by its
// device and address (addresses are never reused, so a handle cannot reach a
// later allocation). Opening it maps the allocation into the importer as an
// uncharged import entry owned by an importer context, which keeps the
// memory alive after the exporter frees it (model/memory_table.h); closing
// it, or the importer's context or process ending, drops that reference.
// Like the driver: a context opening the same handle again gets the same
// pointer with one more reference, and a process cannot open its own handle.
#include "driver/cuda_api.h"
// after cuda.h:
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "driver/contexts.h"
#include "driver/driver_state.h"
#include "driver/memory_accounting.h"

using egpu::simgpu::Allocation;
using egpu::simgpu::AllocationKind;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

constexpr uint64_t kIpcMagic = 0x53494d4950434d48ull;  // "SIMIPCMH"

// The bytes of a CUipcMemHandle.
struct IpcRecord {
  uint64_t magic;
  uint64_t address;  // the exporter's allocation
  uint32_t physical;
  int32_t exporter_pid;
};
static_assert(sizeof(IpcRecord) <= CU_IPC_HANDLE_SIZE);

struct OpenedHandle {
  uint64_t target;
  CUctx_st* ctx;
  uint32_t refs;
};

// Handles this process opened: import address -> what it maps.
struct IpcState {
  std::mutex mutex;  // taken before the device lock, never inside it
  std::map<uint64_t, OpenedHandle> opened;
};

IpcState& ipc() {
  static auto* instance = new IpcState();  // never destroyed: used until exit
  return *instance;
}

// The import of `target` that ctx already holds, if its entry still exists
// (it ends with its context, which may have been destroyed meanwhile).
uint64_t find_open(IpcState& s, CUctx_st* ctx, uint64_t target) {
  for (auto it = s.opened.begin(); it != s.opened.end(); ++it) {
    if (it->second.ctx != ctx || it->second.target != target) continue;
    Allocation a{};
    uint32_t physical = 0;
    if (drv::lookup_allocation(it->first, &a, &physical) &&
        a.kind == static_cast<uint32_t>(AllocationKind::kIpcImport) && a.target == target &&
        a.owner_slot == static_cast<int32_t>(ctx->slot) && a.owner_generation == ctx->generation) {
      return it->first;
    }
    s.opened.erase(it);
    return 0;
  }
  return 0;
}

CUresult get_handle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Allocation a{};
  uint32_t physical = 0;
  if (!drv::lookup_allocation(dptr, &a, &physical) || a.address != dptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // cuMemAlloc memory only: pools and VMM have their own sharing calls.
  if (a.kind != static_cast<uint32_t>(AllocationKind::kDevice) &&
      a.kind != static_cast<uint32_t>(AllocationKind::kPitch)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const IpcRecord record{kIpcMagic, a.address, physical, drv::Driver::get().pid()};
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  std::memcpy(handle->reserved, &record, sizeof record);
  return CUDA_SUCCESS;
}

CUresult open_handle(CUdeviceptr* pdptr, const CUipcMemHandle& handle, unsigned int flags) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (uint32_t stall_ms = 0;
      drv::Driver::get().take_stall(drv::Driver::StallAt::kIpcOpen, &stall_ms)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));  // test hook
  }
  if (pdptr == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  IpcRecord record{};
  std::memcpy(&record, handle.reserved, sizeof record);
  if (record.magic != kIpcMagic) return CUDA_ERROR_INVALID_HANDLE;
  if (record.exporter_pid == drv::Driver::get().pid()) return CUDA_ERROR_INVALID_CONTEXT;
  CUctx_st* current = nullptr;
  if (const CUresult rc = drv::require_current(&current); rc != CUDA_SUCCESS) return rc;
  const int ordinal = drv::Driver::get().ordinal_of(record.physical);
  if (ordinal < 0) return CUDA_ERROR_INVALID_DEVICE;
  // Memory of another device is mapped peer-to-peer; the import belongs to
  // this process's context there, where the memory lives.
  CUctx_st* ctx = current;
  if (ctx->ordinal != ordinal) {
    if (const CUresult rc = drv::context_for_device(ordinal, &ctx); rc != CUDA_SUCCESS) return rc;
  }
  IpcState& s = ipc();
  const std::lock_guard lock(s.mutex);
  if (const uint64_t existing = find_open(s, ctx, record.address); existing != 0) {
    ++s.opened[existing].refs;
    *pdptr = existing;
    return CUDA_SUCCESS;
  }
  uint64_t address = 0;
  uint64_t size = 0;
  const CUresult rc =
      drv::account_import(ctx, record.address, AllocationKind::kIpcImport, false, &address, &size);
  if (rc == CUDA_ERROR_INVALID_VALUE) return CUDA_ERROR_INVALID_HANDLE;  // freed meanwhile
  if (rc != CUDA_SUCCESS) return rc;
  s.opened[address] = OpenedHandle{record.address, ctx, 1};
  *pdptr = address;
  return CUDA_SUCCESS;
}

CUresult close_handle(CUdeviceptr dptr) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  IpcState& s = ipc();
  const std::lock_guard lock(s.mutex);
  const auto it = s.opened.find(dptr);
  if (it == s.opened.end()) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.refs > 0) return CUDA_SUCCESS;
  s.opened.erase(it);
  return drv::release_allocation(dptr, AllocationKind::kIpcImport);
}

}  // namespace

extern "C" {

CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  return guarded([&] { return get_handle(pHandle, dptr); });
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  return guarded([&] { return open_handle(pdptr, handle, Flags); });
}

// The pre-11.0 ABI entry: the same call.
CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  return guarded([&] { return open_handle(pdptr, handle, Flags); });
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  return guarded([&] { return close_handle(dptr); });
}

}  // extern "C"
