// Sharing VMM allocations and memory pools between processes, POSIX file
// descriptor handles only. An exported handle is a sealed memfd holding a
// record of what it names (device, allocation address); the importer reads
// and resolves it in the shared segment, so the fd can travel any way a real
// one does (SCM_RIGHTS, inheritance, /proc/<pid>/fd). Imports are uncharged
// entries that keep their target's memory alive (model/memory_table.h).
// Deviations: an fd holds no reference of its own (an allocation is importable
// while anything still references it), and pool pointers are not checked to
// come from the pool they are imported through.
#include "driver/cuda_api.h"
// after cuda.h:
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "driver/contexts.h"
#include "driver/driver_state.h"
#include "driver/memory_accounting.h"
#include "driver/vmm_state.h"

using egpu::simgpu::Allocation;
using egpu::simgpu::AllocationKind;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

constexpr uint64_t kAllocationMagic = 0x53494d5348414c4cull;  // "SIMSHALL"
constexpr uint64_t kPoolMagic = 0x53494d5348504f4full;        // "SIMSHPOO"
constexpr uint64_t kPointerMagic = 0x53494d5348505452ull;     // "SIMSHPTR"
constexpr unsigned int kPosixFd = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

// What an fd or CUmemPoolPtrExportData names.
struct ShareRecord {
  uint64_t magic;
  uint64_t address;  // allocation or pointer; 0 for a pool
  uint32_t physical;
  int32_t exporter_pid;
};
static_assert(sizeof(ShareRecord) <= sizeof(CUmemPoolPtrExportData::reserved));

// A sealed memfd with the record: what the importer reads is what we wrote.
CUresult export_fd(const ShareRecord& record, void* out) {
  const int fd = ::memfd_create("simgpu-share", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (::pwrite(fd, &record, sizeof record, 0) != static_cast<ssize_t>(sizeof record) ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    ::close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::memcpy(out, &fd, sizeof fd);
  return CUDA_SUCCESS;
}

// The record behind an fd we exported (any process), or false.
bool import_fd(void* os_handle, uint64_t magic, ShareRecord* record) {
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_WRITE) == 0) return false;
  return ::pread(fd, record, sizeof *record, 0) == static_cast<ssize_t>(sizeof *record) &&
         record->magic == magic && record->physical < drv::Driver::get().segment().device_count();
}

CUresult export_allocation(void* out, CUmemGenericAllocationHandle handle,
                           CUmemAllocationHandleType type, unsigned long long flags) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != kPosixFd) return CUDA_ERROR_NOT_SUPPORTED;
  drv::PhysicalAllocation physical{};
  {
    drv::VmmState& s = drv::vmm();
    const std::lock_guard lock(s.mutex);
    const drv::PhysicalAllocation* held = drv::held_handle(s, handle);
    if (held == nullptr || (held->handle_types & kPosixFd) == 0) return CUDA_ERROR_INVALID_VALUE;
    physical = *held;
  }
  Allocation a{};
  uint32_t device = 0;
  if (!drv::lookup_allocation(physical.address, &a, &device)) return CUDA_ERROR_INVALID_VALUE;
  // Re-exporting an import names the allocation it maps.
  const uint64_t target = physical.imported ? a.target : a.address;
  return export_fd(ShareRecord{kAllocationMagic, target, device, drv::Driver::get().pid()}, out);
}

CUresult import_allocation(CUmemGenericAllocationHandle* handle, void* os_handle,
                           CUmemAllocationHandleType type) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != kPosixFd) return CUDA_ERROR_NOT_SUPPORTED;
  ShareRecord record{};
  if (!import_fd(os_handle, kAllocationMagic, &record)) return CUDA_ERROR_INVALID_VALUE;
  const int ordinal = drv::Driver::get().ordinal_of(record.physical);
  if (ordinal < 0) return CUDA_ERROR_NOT_SUPPORTED;  // its device is not visible here
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::context_for_device(ordinal, &ctx); rc != CUDA_SUCCESS) return rc;
  uint64_t address = 0;
  uint64_t size = 0;
  if (const CUresult rc = drv::account_import(ctx, record.address, AllocationKind::kVmmImport, true,
                                              &address, &size);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  drv::PhysicalAllocation physical{ordinal, address, size};
  physical.imported = true;
  physical.handle_types = kPosixFd;
  drv::VmmState& s = drv::vmm();
  const std::lock_guard lock(s.mutex);
  *handle = drv::add_handle(s, physical);
  return CUDA_SUCCESS;
}

CUresult export_pool(void* out, CUmemoryPool pool_handle, CUmemAllocationHandleType type,
                     unsigned long long flags) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
  if (out == nullptr || flags != 0 || pool == nullptr || pool->imported) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Only a pool created IPC-capable for this handle type can be exported.
  if (type != kPosixFd || (pool->handle_types & kPosixFd) == 0) return CUDA_ERROR_INVALID_VALUE;
  return export_fd(ShareRecord{kPoolMagic, 0, pool->physical, drv::Driver::get().pid()}, out);
}

CUresult import_pool(CUmemoryPool* pool_out, void* os_handle, CUmemAllocationHandleType type,
                     unsigned long long flags) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (pool_out == nullptr || flags != 0 || type != kPosixFd) return CUDA_ERROR_INVALID_VALUE;
  ShareRecord record{};
  if (!import_fd(os_handle, kPoolMagic, &record)) return CUDA_ERROR_INVALID_VALUE;
  const int ordinal = drv::Driver::get().ordinal_of(record.physical);
  if (ordinal < 0) return CUDA_ERROR_INVALID_VALUE;
  auto created = std::make_unique<CUmemPoolHandle_st>();
  created->ordinal = ordinal;
  created->physical = record.physical;
  created->imported = true;
  created->handle_types = kPosixFd;
  *pool_out = registry().adopt(std::move(created));
  return CUDA_SUCCESS;
}

CUresult export_pointer(CUmemPoolPtrExportData* out, CUdeviceptr ptr) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Allocation a{};
  uint32_t physical = 0;
  if (!drv::lookup_allocation(ptr, &a, &physical) || a.address != ptr ||
      a.kind != static_cast<uint32_t>(AllocationKind::kAsync)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const ShareRecord record{kPointerMagic, a.address, physical, drv::Driver::get().pid()};
  std::memset(out->reserved, 0, sizeof out->reserved);
  std::memcpy(out->reserved, &record, sizeof record);
  return CUDA_SUCCESS;
}

CUresult import_pointer(CUdeviceptr* ptr_out, CUmemoryPool pool_handle,
                        const CUmemPoolPtrExportData* data) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
  if (ptr_out == nullptr || data == nullptr || pool == nullptr || !pool->imported) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ShareRecord record{};
  std::memcpy(&record, data->reserved, sizeof record);
  if (record.magic != kPointerMagic || record.physical != pool->physical) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::context_for_device(pool->ordinal, &ctx); rc != CUDA_SUCCESS) {
    return rc;
  }
  uint64_t address = 0;
  uint64_t size = 0;
  const CUresult rc =
      drv::account_import(ctx, record.address, AllocationKind::kPoolImport, false, &address, &size);
  if (rc == CUDA_SUCCESS) *ptr_out = address;
  return rc;
}

}  // namespace

extern "C" {

CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags) {
  return guarded([&] { return export_allocation(shareableHandle, handle, handleType, flags); });
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  return guarded([&] { return import_allocation(handle, osHandle, shHandleType); });
}

CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                          CUmemAllocationHandleType handleType,
                                          unsigned long long flags) {
  return guarded([&] { return export_pool(handle_out, pool, handleType, flags); });
}

CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                            CUmemAllocationHandleType handleType,
                                            unsigned long long flags) {
  return guarded([&] { return import_pool(pool_out, handle, handleType, flags); });
}

CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out, CUdeviceptr ptr) {
  return guarded([&] { return export_pointer(shareData_out, ptr); });
}

CUresult cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool,
                                CUmemPoolPtrExportData* shareData) {
  return guarded([&] { return import_pointer(ptr_out, pool, shareData); });
}

}  // extern "C"
