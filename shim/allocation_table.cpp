#include "shim/allocation_table.h"

namespace egpu::shim {

void AllocationTable::insert(AllocationKind kind, uint64_t key, LiveAllocation allocation) {
  std::lock_guard lock(mu_);
  maps_[static_cast<int>(kind)][key] = allocation;
}

std::optional<LiveAllocation> AllocationTable::take(AllocationKind kind, uint64_t key) {
  std::lock_guard lock(mu_);
  auto& map = maps_[static_cast<int>(kind)];
  auto it = map.find(key);
  if (it == map.end()) return std::nullopt;
  LiveAllocation found = it->second;
  map.erase(it);
  return found;
}

uint64_t AllocationTable::live_bytes(int ordinal) const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const auto& map : maps_) {
    for (const auto& [key, a] : map) {
      if (a.ordinal == ordinal) total += a.bytes;
    }
  }
  return total;
}

size_t AllocationTable::size() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& map : maps_)
    n += map.size();
  return n;
}

}  // namespace egpu::shim
