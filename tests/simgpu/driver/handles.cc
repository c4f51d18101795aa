#include "driver/handles.h"

CUctx_st::~CUctx_st() = default;

namespace egpu::simgpu::driver {

bool HandleRegistry::contains(const void* handle, HandleKind kind) const {
  std::lock_guard lock(mutex_);
  const auto it = objects_.find(handle);
  return it != objects_.end() && it->second->kind == kind;
}

bool HandleRegistry::destroy(const void* handle) {
  std::unique_ptr<HandleBase> doomed;
  {
    std::lock_guard lock(mutex_);
    const auto it = objects_.find(handle);
    if (it == objects_.end()) return false;
    doomed = std::move(it->second);
    objects_.erase(it);
  }
  return true;  // destroyed here, outside the lock
}

void HandleRegistry::destroy_owned_by(const CUctx_st* ctx) {
  std::vector<std::unique_ptr<HandleBase>> doomed;
  {
    std::lock_guard lock(mutex_);
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (it->second->owner_ctx == ctx) {
        doomed.push_back(std::move(it->second));
        it = objects_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

HandleRegistry& registry() {
  // Never destroyed: other threads may still call in while the process exits.
  static auto* instance = new HandleRegistry();
  return *instance;
}

}  // namespace egpu::simgpu::driver
