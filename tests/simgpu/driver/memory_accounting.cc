#include "driver/memory_accounting.h"

#include "driver/device_attributes.h"
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

namespace {

uint64_t limit_cost(const CUctx_st* ctx, int limit, uint64_t value) {
  switch (limit) {
    case CU_LIMIT_MALLOC_HEAP_SIZE:
    case CU_LIMIT_PRINTF_FIFO_SIZE:
      return value;
    case CU_LIMIT_STACK_SIZE: {
      int sms = 0, threads = 0;
      device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->physical, &sms);
      device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, ctx->physical, &threads);
      return value * static_cast<uint64_t>(sms) * static_cast<uint64_t>(threads);
    }
    default:
      return 0;
  }
}

// What a fresh context's defaults cost (part of its overhead, not charged).
uint64_t default_cost(const CUctx_st* ctx, int limit) {
  switch (limit) {
    case CU_LIMIT_MALLOC_HEAP_SIZE:
      return uint64_t{8} << 20;
    case CU_LIMIT_PRINTF_FIFO_SIZE:
      return uint64_t{1} << 20;
    case CU_LIMIT_STACK_SIZE:
      return limit_cost(ctx, limit, 1024);
    default:
      return 0;
  }
}

}  // namespace

CUresult charge_limit(CUctx_st* ctx, int limit, size_t value) {
  const uint64_t cost = limit_cost(ctx, limit, value);
  const uint64_t base = default_cost(ctx, limit);
  const uint64_t extra = cost > base ? cost - base : 0;
  const auto old = ctx->limit_allocations.find(limit);
  uint64_t fresh = 0;
  if (extra > 0) {
    Allocation current{};
    uint32_t physical = 0;
    if (old != ctx->limit_allocations.end() &&
        lookup_allocation(old->second, &current, &physical) && current.size == extra) {
      return CUDA_SUCCESS;
    }
    if (const CUresult rc = account_allocation(ctx, extra, AllocationKind::kContextLimit, &fresh);
        rc != CUDA_SUCCESS) {
      return rc;
    }
  }
  if (old != ctx->limit_allocations.end()) {
    release_allocation(old->second);
    ctx->limit_allocations.erase(old);
  }
  if (fresh != 0) ctx->limit_allocations[limit] = fresh;
  return CUDA_SUCCESS;
}

int device_of_address(uint64_t address) {
  const uint64_t range = address >> kDeviceRangeShift;
  if (range < 1 || range > Driver::get().segment().device_count()) return -1;
  return static_cast<int>(range - 1);
}

CUresult account_import(CUctx_st* ctx, uint64_t target, AllocationKind kind, bool allow_orphaned,
                        uint64_t* address, uint64_t* size) {
  if (device_of_address(target) != static_cast<int>(ctx->physical)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const AllocOwner owner{static_cast<int32_t>(ctx->slot), ctx->generation, Driver::get().pid()};
  return with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t) {
    if (!context_matches(dev.timeline, ctx->slot, ctx->generation)) {
      return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    const AllocResult result = import_allocation(dev.memory, target, kind, owner, allow_orphaned);
    switch (result.status) {
      case AllocStatus::kOk: {
        *address = result.address;
        const Allocation* a = find_allocation(dev.memory, result.address);
        *size = a != nullptr ? a->size : 0;
        return CUDA_SUCCESS;
      }
      case AllocStatus::kNotFound:
      case AllocStatus::kInvalidSize:
        return CUDA_ERROR_INVALID_VALUE;
      default:
        return CUDA_ERROR_OUT_OF_MEMORY;  // no address space or table entry left
    }
  });
}

CUresult release_allocation(uint64_t address, std::optional<AllocationKind> only) {
  const int physical = device_of_address(address);
  if (physical < 0) return CUDA_ERROR_INVALID_VALUE;
  return with_device(static_cast<uint32_t>(physical), false, [&](DeviceShared& dev, uint64_t) {
    return release_address(dev.memory, address, Driver::get().pid(), only) > 0
               ? CUDA_SUCCESS
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
