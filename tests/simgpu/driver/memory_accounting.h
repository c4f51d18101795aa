// Device memory as the driver accounts it: allocations live in the device's
// shared table, owned by a context (freed with it, or when its process dies).
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>
#include <optional>

#include "driver/handles.h"
#include "model/layout.h"

namespace egpu::simgpu::driver {

// Accounts `size` bytes on ctx's device; CUDA_ERROR_OUT_OF_MEMORY when it does
// not fit (after reclaiming memory of processes that died).
CUresult account_allocation(CUctx_st* ctx, uint64_t size, AllocationKind kind, uint64_t* address);

// Maps another process's allocation starting at `target` (on ctx's device)
// into ctx as an import of `kind`: its own address, the target's size, no
// new charge. CUDA_ERROR_INVALID_VALUE if there is no such allocation (an
// orphaned one only counts when `allow_orphaned`).
CUresult account_import(CUctx_st* ctx, uint64_t target, AllocationKind kind, bool allow_orphaned,
                        uint64_t* address, uint64_t* size);

// Ends an allocation or import of this process by its start address (of kind
// `only` if given, see model/memory_table.h); CUDA_ERROR_INVALID_VALUE if
// there is none.
CUresult release_allocation(uint64_t address, std::optional<AllocationKind> only = std::nullopt);

// cuCtxSetLimit: the device memory the driver backs `limit` with at `value`
// (heap and printf FIFO: the bytes; stack: per thread the device can hold),
// charged to ctx beyond the defaults. CUDA_ERROR_OUT_OF_MEMORY leaves the old
// charge. Called with ctx->mutex held.
CUresult charge_limit(CUctx_st* ctx, int limit, size_t value);

// The physical device whose address range holds `address`, or -1.
int device_of_address(uint64_t address);

// A copy of the live allocation containing `address` (false if none).
bool lookup_allocation(uint64_t address, Allocation* out, uint32_t* physical);

}  // namespace egpu::simgpu::driver
