// Virtual memory management (cuMemCreate and friends) and stream-ordered
// memory pools. Physical allocations are accounted when created and, like the
// driver, freed at the last of cuMemRelease (every reference, retained ones
// included) and cuMemUnmap (every mapping of it); address reservations and
// mappings are otherwise bookkeeping only.
// Pools keep what is freed until a synchronisation gives back what is above
// their release threshold (driver/pool_cache.h).
#include "driver/cuda_api.h"
// after cuda.h:
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "driver/contexts.h"
#include "driver/driver_state.h"
#include "driver/graph_memory.h"
#include "driver/graphs.h"
#include "driver/memory_accounting.h"
#include "driver/pool_cache.h"
#include "driver/streams.h"
#include "driver/vmm_state.h"

using egpu::simgpu::AllocationKind;
using egpu::simgpu::driver::DefaultStream;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

using drv::collect_if_unused;
using drv::held_handle;
using drv::PhysicalAllocation;
using drv::vmm;
using drv::VmmState;

constexpr size_t kGranularity = drv::kVmmGranularity;

CUmemPoolHandle_st* default_pool(int ordinal) {
  VmmState& s = vmm();
  const std::lock_guard lock(s.mutex);
  const auto n = static_cast<size_t>(drv::Driver::get().visible_count());
  if (s.default_pools.size() < n) {
    s.default_pools.resize(n, nullptr);
    s.current_pools.resize(n, nullptr);
  }
  CUmemPoolHandle_st*& pool = s.default_pools[static_cast<size_t>(ordinal)];
  if (pool == nullptr) {
    auto created = std::make_unique<CUmemPoolHandle_st>();
    created->ordinal = ordinal;
    created->physical = drv::Driver::get().physical_of(ordinal);
    created->is_default = true;
    pool = registry().adopt(std::move(created));
  }
  if (s.current_pools[static_cast<size_t>(ordinal)] == nullptr) {
    s.current_pools[static_cast<size_t>(ordinal)] = pool;
  }
  return pool;
}

bool device_location(const CUmemLocation& location, int* ordinal) {
  if (location.type != CU_MEM_LOCATION_TYPE_DEVICE || !drv::valid_device(location.id)) {
    return false;
  }
  *ordinal = location.id;
  return true;
}

// Host memory made with cuMemCreate (pinned, mapped into the device's
// address space), as NCCL makes its proxy buffers: the device's memory is
// not touched.
bool host_location(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_HOST ||
         location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

CUresult alloc_from_pool(CUstream_st* stream, CUmemPoolHandle_st* pool, size_t bytes,
                         CUdeviceptr* dptr) {
  CUctx_st* ctx = stream->ctx;
  if (ctx->ordinal != pool->ordinal) {
    if (const CUresult rc = drv::context_for_device(pool->ordinal, &ctx); rc != CUDA_SUCCESS)
      return rc;
  }
  uint64_t address = 0;
  const CUresult rc = drv::pool_allocate(ctx, pool, bytes, &address);
  if (rc == CUDA_SUCCESS) *dptr = address;
  return rc;
}

// The pool cuMemAllocAsync uses on `ordinal` (cuDeviceSetMemPool's).
CUmemPoolHandle_st* current_pool(int ordinal) {
  default_pool(ordinal);
  VmmState& s = vmm();
  const std::lock_guard lock(s.mutex);
  return s.current_pools[static_cast<size_t>(ordinal)];
}

CUresult alloc_async(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool_handle, CUstream handle,
                     DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  CUmemPoolHandle_st* pool = current_pool(stream->ctx->ordinal);
  if (pool_handle != nullptr) {
    pool = registry().find<CUmemPoolHandle_st>(pool_handle);
    if (pool == nullptr || pool->imported)
      return CUDA_ERROR_INVALID_VALUE;  // imports cannot allocate
  }
  const int ordinal = pool->ordinal;
  if (stream->capture_graph != nullptr) {  // captured: the graph's allocation node
    const drv::GraphAllocation memory{drv::new_graph_address(ordinal, bytes), bytes, ordinal};
    *dptr = memory.address;
    return drv::add_graph_node(nullptr, stream->capture_graph, CU_GRAPH_NODE_TYPE_MEM_ALLOC, 0,
                               memory);
  }
  return alloc_from_pool(stream, pool, bytes, dptr);
}

CUresult free_async(CUdeviceptr dptr, CUstream handle, DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  drv::GraphAllocation memory;
  const bool graph_memory = drv::find_graph_allocation(dptr, &memory);
  if (stream->capture_graph != nullptr) {  // captured: a free node, of graph memory only
    if (!graph_memory) return CUDA_ERROR_INVALID_VALUE;
    return drv::add_graph_node(nullptr, stream->capture_graph, CU_GRAPH_NODE_TYPE_MEM_FREE, 0,
                               memory);
  }
  CUresult rc = CUDA_SUCCESS;
  if (drv::free_graph_allocation(dptr, &rc) || drv::pool_free(dptr, &rc)) return rc;
  return drv::release_allocation(dptr);
}

}  // namespace

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  (void)option;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  (void)flags;
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    int ordinal = 0;
    const bool host = prop != nullptr && host_location(prop->location);
    if (handle == nullptr || prop == nullptr || size == 0 || size % kGranularity != 0 ||
        (!host && !device_location(prop->location, &ordinal))) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (host) {
      VmmState& s = vmm();
      const std::lock_guard lock(s.mutex);
      PhysicalAllocation physical{-1, 0, size};
      physical.host = true;
      physical.handle_types = static_cast<unsigned int>(prop->requestedHandleTypes);
      *handle = drv::add_handle(s, physical);
      return CUDA_SUCCESS;
    }
    CUctx_st* ctx = nullptr;
    if (const CUresult rc = drv::context_for_device(ordinal, &ctx); rc != CUDA_SUCCESS) return rc;
    uint64_t address = 0;
    const CUresult rc = drv::account_allocation(ctx, size, AllocationKind::kVmm, &address);
    if (rc != CUDA_SUCCESS) return rc;
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    PhysicalAllocation physical{ordinal, address, size};
    physical.handle_types = static_cast<unsigned int>(prop->requestedHandleTypes);
    *handle = drv::add_handle(s, physical);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    std::optional<PhysicalAllocation> freed;
    {
      VmmState& s = vmm();
      const std::lock_guard lock(s.mutex);
      PhysicalAllocation* physical = held_handle(s, handle);
      if (physical == nullptr) return CUDA_ERROR_INVALID_VALUE;
      --physical->refs;
      freed = collect_if_unused(s, handle);
    }
    return freed ? drv::free_physical(*freed) : CUDA_SUCCESS;
  });
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                CUmemGenericAllocationHandle handle) {
  return guarded([&] {
    if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    const PhysicalAllocation* physical = held_handle(s, handle);
    if (physical == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *prop = CUmemAllocationProp{};
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = physical->host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = physical->host ? 0 : physical->ordinal;
    prop->requestedHandleTypes = static_cast<CUmemAllocationHandleType>(physical->handle_types);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  (void)addr;  // a hint only
  (void)flags;
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (ptr == nullptr || size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t start =
        drv::Driver::get().segment().reserve_va(size, std::max(alignment, kGranularity));
    if (start == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    s.reservations[start] = size;
    *ptr = start;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  (void)size;
  return guarded([&] {
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    return s.reservations.erase(ptr) > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  (void)flags;
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    PhysicalAllocation* physical = held_handle(s, handle);
    if (physical == nullptr || size == 0 || offset + size > physical->size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto reservation = s.reservations.upper_bound(ptr);
    if (reservation == s.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
    --reservation;
    if (ptr + size > reservation->first + reservation->second) return CUDA_ERROR_INVALID_VALUE;
    if (!s.mappings.emplace(ptr, handle).second) return CUDA_ERROR_ALREADY_MAPPED;
    ++physical->mapped;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return guarded([&] {
    std::vector<PhysicalAllocation> freed;
    {
      VmmState& s = vmm();
      const std::lock_guard lock(s.mutex);
      const auto first = s.mappings.lower_bound(ptr);
      const auto last = s.mappings.lower_bound(ptr + size);
      if (first == last) return CUDA_ERROR_INVALID_VALUE;
      std::vector<CUmemGenericAllocationHandle> unmapped;
      for (auto m = first; m != last; ++m) {
        const auto physical = s.handles.find(m->second);
        if (physical != s.handles.end() && physical->second.mapped > 0) --physical->second.mapped;
        unmapped.push_back(m->second);
      }
      s.mappings.erase(first, last);
      for (const CUmemGenericAllocationHandle h : unmapped) {
        if (auto physical = collect_if_unused(s, h)) freed.push_back(*physical);
      }
    }
    for (const PhysicalAllocation& physical : freed)
      drv::free_physical(physical);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  (void)size;
  return guarded([&] {
    if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    return s.mappings.count(ptr) > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  return guarded([&] {
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    const auto it = s.mappings.find(reinterpret_cast<CUdeviceptr>(addr));
    if (it == s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    const auto physical = s.handles.find(it->second);
    if (physical == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    ++physical->second.refs;  // released by its own cuMemRelease
    *handle = it->second;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!drv::valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = default_pool(dev);
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!drv::valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    default_pool(dev);
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    *pool = s.current_pools[static_cast<size_t>(dev)];
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool_handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (!drv::valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
    if (pool == nullptr || pool->ordinal != dev || pool->imported) return CUDA_ERROR_INVALID_VALUE;
    default_pool(dev);
    VmmState& s = vmm();
    const std::lock_guard lock(s.mutex);
    s.current_pools[static_cast<size_t>(dev)] = pool;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    int ordinal = 0;
    if (pool == nullptr || poolProps == nullptr ||
        !device_location(poolProps->location, &ordinal)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto created = std::make_unique<CUmemPoolHandle_st>();
    created->ordinal = ordinal;
    created->physical = drv::Driver::get().physical_of(ordinal);
    created->handle_types = static_cast<unsigned int>(poolProps->handleTypes);
    *pool = registry().adopt(std::move(created));
    return CUDA_SUCCESS;
  });
}

CUresult cuMemPoolDestroy(CUmemoryPool pool_handle) {
  return guarded([&] {
    CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
    if (pool == nullptr || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
    {
      VmmState& s = vmm();
      const std::lock_guard lock(s.mutex);
      for (size_t i = 0; i < s.current_pools.size(); ++i) {
        if (s.current_pools[i] == pool) s.current_pools[i] = s.default_pools[i];
      }
    }
    drv::forget_pool(pool);
    registry().destroy(pool);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool_handle, size_t minBytesToKeep) {
  return guarded([&] {
    CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    drv::trim_pool(pool, minBytesToKeep);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool_handle, CUmemPool_attribute attr, void* value) {
  return guarded([&] {
    CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
    if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
      pool->release_threshold = *static_cast<cuuint64_t*>(value);
    } else if (attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) {
      pool->reuse_opportunistic = *static_cast<int*>(value) != 0;
    } else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) {
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      drv::reset_pool_memory_high(pool, attr);
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool_handle, CUmemPool_attribute attr, void* value) {
  return guarded([&] {
    CUmemPoolHandle_st* pool = registry().find<CUmemPoolHandle_st>(pool_handle);
    if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *static_cast<int*>(value) = pool->reuse_opportunistic ? 1 : 0;
        break;
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *static_cast<int*>(value) = 1;
        break;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *static_cast<cuuint64_t*>(value) = pool->release_threshold;
        break;
      default: {  // reserved/used figures (pool_cache.h)
        uint64_t figure = 0;
        drv::pool_memory_figure(pool, attr, &figure);
        *static_cast<cuuint64_t*>(value) = figure;
        break;
      }
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return guarded(
      [&] { return alloc_async(dptr, bytesize, nullptr, hStream, DefaultStream::kLegacy); });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return guarded(
      [&] { return alloc_async(dptr, bytesize, nullptr, hStream, DefaultStream::kPerThread); });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream) {
  return guarded([&] {
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, DefaultStream::kLegacy);
  });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
  return guarded([&] {
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, DefaultStream::kPerThread);
  });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return guarded([&] { return free_async(dptr, hStream, DefaultStream::kLegacy); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return guarded([&] { return free_async(dptr, hStream, DefaultStream::kPerThread); });
}

}  // extern "C"
