#include "shim/mem_pool_table.h"

namespace egpu::shim {

void MemPoolTable::note(const void* pool, int ordinal) {
  std::lock_guard lock(mu_);
  pools_.try_emplace(pool, ordinal);
  size_.store(pools_.size(), std::memory_order_relaxed);
}

std::optional<int> MemPoolTable::device_of(const void* pool) const {
  std::lock_guard lock(mu_);
  const auto it = pools_.find(pool);
  if (it == pools_.end()) return std::nullopt;
  return it->second;
}

void MemPoolTable::forget(const void* pool) {
  std::lock_guard lock(mu_);
  pools_.erase(pool);
  size_.store(pools_.size(), std::memory_order_relaxed);
}

std::vector<std::pair<const void*, int>> MemPoolTable::pools() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<const void*, int>> out;
  for (const auto& [pool, ordinal] : pools_) {
    if (ordinal != kHost) out.emplace_back(pool, ordinal);
  }
  return out;
}

}  // namespace egpu::shim
