#include "driver/vmm_state.h"

#include "driver/memory_accounting.h"

namespace egpu::simgpu::driver {

VmmState& vmm() {
  static auto* instance = new VmmState();  // never destroyed: used until exit
  return *instance;
}

CUmemGenericAllocationHandle add_handle(VmmState& s, const PhysicalAllocation& physical) {
  const CUmemGenericAllocationHandle id = s.next_handle++;
  s.handles[id] = physical;
  return id;
}

std::optional<PhysicalAllocation> collect_if_unused(VmmState& s,
                                                    CUmemGenericAllocationHandle handle) {
  const auto it = s.handles.find(handle);
  if (it == s.handles.end() || it->second.refs > 0 || it->second.mapped > 0) return std::nullopt;
  const PhysicalAllocation physical = it->second;
  s.handles.erase(it);
  return physical;
}

PhysicalAllocation* held_handle(VmmState& s, CUmemGenericAllocationHandle handle) {
  const auto it = s.handles.find(handle);
  return it != s.handles.end() && it->second.refs > 0 ? &it->second : nullptr;
}

CUresult free_physical(const PhysicalAllocation& physical) {
  if (physical.host) return CUDA_SUCCESS;  // pinned host memory, not the device's
  return release_allocation(physical.address,
                            physical.imported ? AllocationKind::kVmmImport : AllocationKind::kVmm);
}

}  // namespace egpu::simgpu::driver
