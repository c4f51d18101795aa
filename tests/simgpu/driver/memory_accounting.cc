#include "driver/memory_accounting.h"

#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "model/memory_table.h"
#include "model/timeline.h"

namespace egpu::simgpu::driver {

CUresult account_allocation(CUctx_st* ctx, uint64_t size, AllocationKind kind, uint64_t* address) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const AllocOwner owner{static_cast<int32_t>(ctx->slot), ctx->generation, Driver::get().pid()};
  return with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t now) {
    if (!context_matches(dev.timeline, ctx->slot, ctx->generation)) {
      return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    AllocResult result = allocate(dev.memory, size, kind, owner);
    if (result.status == AllocStatus::kOutOfMemory) {
      sweep_dead_contexts(dev, now);  // a dead process's memory is free at once
      result = allocate(dev.memory, size, kind, owner);
    }
    switch (result.status) {
      case AllocStatus::kOk:
        *address = result.address;
        return CUDA_SUCCESS;
      case AllocStatus::kInvalidSize:
        return CUDA_ERROR_INVALID_VALUE;
      default:
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
  });
}

int device_of_address(uint64_t address) {
  const uint64_t range = address >> kDeviceRangeShift;
  if (range < 1 || range > Driver::get().segment().device_count()) return -1;
  return static_cast<int>(range - 1);
}

CUresult release_allocation(uint64_t address) {
  const int physical = device_of_address(address);
  if (physical < 0) return CUDA_ERROR_INVALID_VALUE;
  return with_device(static_cast<uint32_t>(physical), false, [&](DeviceShared& dev, uint64_t) {
    return release_address(dev.memory, address, Driver::get().pid()) > 0 ? CUDA_SUCCESS
                                                                         : CUDA_ERROR_INVALID_VALUE;
  });
}

bool lookup_allocation(uint64_t address, Allocation* out, uint32_t* physical) {
  const int device = device_of_address(address);
  if (device < 0) return false;
  bool found = false;
  with_device(static_cast<uint32_t>(device), false, [&](DeviceShared& dev, uint64_t) {
    const Allocation* a = find_allocation(dev.memory, address);
    if (a != nullptr && a->owner_pid == Driver::get().pid()) {  // others' memory is not ours
      *out = *a;
      found = true;
    }
    return CUDA_SUCCESS;
  });
  *physical = static_cast<uint32_t>(device);
  return found;
}

}  // namespace egpu::simgpu::driver
