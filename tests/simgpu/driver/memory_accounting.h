// Device memory as the driver accounts it: allocations live in the device's
// shared table, owned by a context (freed with it, or when its process dies).
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "driver/handles.h"
#include "model/layout.h"

namespace egpu::simgpu::driver {

// Accounts `size` bytes on ctx's device; CUDA_ERROR_OUT_OF_MEMORY when it does
// not fit (after reclaiming memory of processes that died).
CUresult account_allocation(CUctx_st* ctx, uint64_t size, AllocationKind kind, uint64_t* address);

// Frees an allocation of this process by its start address;
// CUDA_ERROR_INVALID_VALUE if there is none.
CUresult release_allocation(uint64_t address);

// The physical device whose address range holds `address`, or -1.
int device_of_address(uint64_t address);

// A copy of the live allocation containing `address` (false if none).
bool lookup_allocation(uint64_t address, Allocation* out, uint32_t* physical);

}  // namespace egpu::simgpu::driver
