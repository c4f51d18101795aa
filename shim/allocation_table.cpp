#include "shim/allocation_table.h"

namespace egpu::shim {

std::optional<LiveAllocation> AllocationTable::insert(AllocationKind kind, uint64_t key,
                                                      LiveAllocation allocation) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = maps_[static_cast<int>(kind)].try_emplace(key, allocation);
  if (inserted) return std::nullopt;
  const LiveAllocation replaced = it->second;
  it->second = allocation;
  return replaced;
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

std::optional<LiveAllocation> AllocationTable::find(AllocationKind kind, uint64_t key) const {
  std::lock_guard lock(mu_);
  const auto& map = maps_[static_cast<int>(kind)];
  const auto it = map.find(key);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

std::vector<uint64_t> AllocationTable::keys(AllocationKind kind) const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& [key, allocation] : maps_[static_cast<int>(kind)])
    out.push_back(key);
  return out;
}

std::vector<LiveAllocation> AllocationTable::take_context(uintptr_t context) {
  std::vector<LiveAllocation> taken;
  if (context == 0) return taken;
  std::lock_guard lock(mu_);
  for (auto& map : maps_) {
    std::erase_if(map, [&](const auto& entry) {
      if (entry.second.context != context) return false;
      taken.push_back(entry.second);
      return true;
    });
  }
  return taken;
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
