#include "shim/free_part_promises.h"

#include <algorithm>

namespace egpu::shim {

uint64_t FreePartPromises::promise(uint64_t pool, uint64_t free_part, uint64_t want) {
  std::lock_guard lock(mu_);
  uint64_t& promised = promised_[pool];
  const uint64_t available = free_part > promised ? free_part - promised : 0;
  const uint64_t granted = std::min(available, want);
  promised += granted;
  return granted;
}

void FreePartPromises::unpromise(uint64_t pool, uint64_t bytes) {
  std::lock_guard lock(mu_);
  uint64_t& promised = promised_[pool];
  promised -= std::min(promised, bytes);
}

}  // namespace egpu::shim
