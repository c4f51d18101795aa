#include "shim/context_devices.h"

#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

struct LastContext {
  const ContextDevices* owner = nullptr;
  CUcontext context = nullptr;
  uint64_t generation = 0;
  int ordinal = -1;
};
thread_local LastContext t_last;

}  // namespace

int ContextDevices::current_ordinal() {
  const auto get_current = EGPU_REAL(cuCtxGetCurrent);
  CUcontext context = nullptr;
  if (get_current == nullptr || get_current(&context) != CUDA_SUCCESS || context == nullptr) {
    return -1;
  }
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (t_last.owner == this && t_last.context == context && t_last.generation == generation) {
    return t_last.ordinal;
  }
  int ordinal = -1;
  {
    std::lock_guard lock(mu_);
    auto it = devices_.find(context);
    if (it != devices_.end()) {
      ordinal = it->second;
    } else {
      const auto get_device = EGPU_REAL(cuCtxGetDevice);
      CUdevice device = -1;
      if (get_device == nullptr || get_device(&device) != CUDA_SUCCESS) return -1;
      ordinal = device;
      devices_.emplace(context, ordinal);
    }
  }
  t_last = LastContext{this, context, generation, ordinal};
  return ordinal;
}

void ContextDevices::invalidate() {
  std::lock_guard lock(mu_);
  devices_.clear();
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

CUcontext active_primary(CUdevice dev) noexcept {
  const auto state = EGPU_REAL(cuDevicePrimaryCtxGetState);
  const auto retain = EGPU_REAL(cuDevicePrimaryCtxRetain);
  const auto release = EGPU_REAL(cuDevicePrimaryCtxRelease_v2);
  unsigned int flags = 0;
  int active = 0;
  if (state == nullptr || retain == nullptr || release == nullptr ||
      state(dev, &flags, &active) != CUDA_SUCCESS || active == 0) {
    return nullptr;
  }
  CUcontext primary = nullptr;
  if (retain(&primary, dev) != CUDA_SUCCESS) return nullptr;
  release(dev);
  return primary;
}

}  // namespace egpu::shim
