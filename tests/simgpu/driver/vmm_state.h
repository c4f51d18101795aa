// This process's view of virtual memory management: physical allocation
// handles (created or imported), address reservations, mappings and the
// per-device memory pools. Shared by the VMM calls and their export/import.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "driver/handles.h"

namespace egpu::simgpu::driver {

inline constexpr size_t kVmmGranularity = size_t{2} << 20;

struct PhysicalAllocation {
  int ordinal;
  uint64_t address;  // entry in the device's memory table (an import's own entry)
  size_t size;
  bool imported = false;          // cuMemImportFromShareableHandle
  bool host = false;              // a host location (NCCL's proxy buffers): no device memory
  unsigned int handle_types = 0;  // CUmemAllocationProp::requestedHandleTypes
  uint32_t refs = 1;              // cuMemCreate/import + cuMemRetainAllocationHandle - cuMemRelease
  uint32_t mapped = 0;            // live mappings
};

struct VmmState {
  std::mutex mutex;
  uint64_t next_handle = 1;
  std::map<CUmemGenericAllocationHandle, PhysicalAllocation> handles;
  std::map<CUdeviceptr, size_t> reservations;                    // start -> size
  std::map<CUdeviceptr, CUmemGenericAllocationHandle> mappings;  // start -> handle
  std::vector<CUmemPoolHandle_st*> default_pools;                // by ordinal
  std::vector<CUmemPoolHandle_st*> current_pools;                // by ordinal
};

VmmState& vmm();

// A new handle for `physical` (one reference, unmapped). Caller holds s.mutex.
CUmemGenericAllocationHandle add_handle(VmmState& s, const PhysicalAllocation& physical);

// The handle's allocation if nothing references it any more (then
// forgotten); handle values are never reused, so an entry can outlive its
// last release. Caller holds s.mutex.
std::optional<PhysicalAllocation> collect_if_unused(VmmState& s,
                                                    CUmemGenericAllocationHandle handle);

// A handle the caller still holds a reference to. Caller holds s.mutex.
PhysicalAllocation* held_handle(VmmState& s, CUmemGenericAllocationHandle handle);

// Frees a collected allocation's device memory (or ends its import).
// Without s.mutex: it takes the device lock.
CUresult free_physical(const PhysicalAllocation& physical);

}  // namespace egpu::simgpu::driver
