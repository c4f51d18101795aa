// Memory queries report the instance's quota, so frameworks size themselves to
// it: total = quota, free = quota - used (never more than is really free).
#include <algorithm>
#include <limits>

#include "core/quota/memory_quota.h"
#include "shim/fast_clock.h"
#include "shim/memory_accounting.h"

namespace egpu::shim {
namespace {

// The attachment and quota of `ordinal` (kCurrentDevice: the current
// context's), or null when that device is not enforced.
Attachment* quota_attachment(int ordinal, uint64_t* quota) noexcept {
  try {
    ProcessState* s = managed_state();
    if (s == nullptr) return nullptr;
    GpuBinding* b = ordinal == kCurrentDevice ? s->current_binding() : s->binding(ordinal);
    if (b == nullptr) return nullptr;
    Attachment* a = s->ensure_attached(*b, launch_clock_ns());
    if (a == nullptr) return nullptr;
    *quota = shm::slot_mem_limit(a->control());
    return *quota != shm::kNoMemLimit ? a : nullptr;
  } catch (...) {
    return nullptr;
  }
}

template <typename Size>
void report_info(Size* free_bytes, Size* total_bytes) {
  uint64_t quota = 0;
  Attachment* a = quota_attachment(kCurrentDevice, &quota);
  if (a == nullptr) return;
  const uint64_t used = quota::used(a->instance);
  const uint64_t left = quota > used ? quota - used : 0;
  constexpr uint64_t kMax = std::numeric_limits<Size>::max();
  if (free_bytes != nullptr) {
    *free_bytes = static_cast<Size>(std::min<uint64_t>({left, uint64_t{*free_bytes}, kMax}));
  }
  if (total_bytes != nullptr) *total_bytes = static_cast<Size>(std::min(quota, kMax));
}

template <typename Size>
void report_total(Size* bytes, CUdevice dev) {
  uint64_t quota = 0;
  if (bytes == nullptr || quota_attachment(dev, &quota) == nullptr) return;
  *bytes = static_cast<Size>(std::min<uint64_t>(quota, std::numeric_limits<Size>::max()));
}

}  // namespace
}  // namespace egpu::shim

using egpu::shim::note_call;
using egpu::shim::RealId;

extern "C" {

CUresult CUDAAPI cuMemGetInfo(unsigned int* free, unsigned int* total) {
  EGPU_REAL_OR_RETURN(cuMemGetInfo);
  const CUresult result = real(free, total);
  note_call(RealId::cuMemGetInfo);
  if (result == CUDA_SUCCESS) egpu::shim::report_info(free, total);
  return result;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  EGPU_REAL_OR_RETURN(cuMemGetInfo_v2);
  const CUresult result = real(free, total);
  note_call(RealId::cuMemGetInfo_v2);
  if (result == CUDA_SUCCESS) egpu::shim::report_info(free, total);
  return result;
}

CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  EGPU_REAL_OR_RETURN(cuDeviceTotalMem);
  const CUresult result = real(bytes, dev);
  note_call(RealId::cuDeviceTotalMem);
  if (result == CUDA_SUCCESS) egpu::shim::report_total(bytes, dev);
  return result;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  EGPU_REAL_OR_RETURN(cuDeviceTotalMem_v2);
  const CUresult result = real(bytes, dev);
  note_call(RealId::cuDeviceTotalMem_v2);
  if (result == CUDA_SUCCESS) egpu::shim::report_total(bytes, dev);
  return result;
}

}  // extern "C"
