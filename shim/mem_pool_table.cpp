#include "shim/mem_pool_table.h"

namespace egpu::shim {

void MemPoolTable::note(const void* pool, int ordinal) {
  std::lock_guard lock(mu_);
  pools_[pool] = ordinal;
  size_.store(pools_.size(), std::memory_order_relaxed);
}

void MemPoolTable::forget(const void* pool) {
  std::lock_guard lock(mu_);
  pools_.erase(pool);
  size_.store(pools_.size(), std::memory_order_relaxed);
}

std::vector<std::pair<const void*, int>> MemPoolTable::pools() const {
  std::lock_guard lock(mu_);
  return {pools_.begin(), pools_.end()};
}

}  // namespace egpu::shim
