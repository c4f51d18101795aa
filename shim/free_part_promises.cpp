#include "shim/free_part_promises.h"

#include <algorithm>

namespace egpu::shim {

uint64_t FreePartPromises::promise(uint64_t pool, uint64_t free_part, uint64_t want) {
  std::lock_guard lock(mu_);
  Pool& p = pools_[pool];
  const uint64_t available = free_part > p.promised ? free_part - p.promised : 0;
  const uint64_t granted = std::min(available, want);
  p.promised += granted;
  ++p.admissions;
  return granted;
}

void FreePartPromises::unpromise(uint64_t pool, uint64_t bytes) {
  std::lock_guard lock(mu_);
  const auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  it->second.promised -= std::min(it->second.promised, bytes);
  if (--it->second.admissions <= 0) pools_.erase(it);
}

bool FreePartPromises::in_flight(uint64_t pool) const {
  std::lock_guard lock(mu_);
  return pools_.contains(pool);
}

}  // namespace egpu::shim
