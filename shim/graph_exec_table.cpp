#include "shim/graph_exec_table.h"

#include <algorithm>

namespace egpu::shim {

void GraphExecTable::note(const void* exec, GraphAllocations allocations) {
  std::lock_guard lock(mu_);
  if (allocations.empty()) {
    execs_.erase(exec);
  } else {
    execs_[exec] = Entry{std::move(allocations), false};
  }
  size_.store(execs_.size(), std::memory_order_relaxed);
}

void GraphExecTable::forget(const void* exec) {
  note(exec, {});
}

std::optional<GraphExecTable::Entry> GraphExecTable::find(const void* exec) const {
  std::lock_guard lock(mu_);
  const auto it = execs_.find(exec);
  if (it == execs_.end()) return std::nullopt;
  return it->second;
}

void GraphExecTable::set_mapped(const void* exec) {
  std::lock_guard lock(mu_);
  if (const auto it = execs_.find(exec); it != execs_.end()) it->second.mapped = true;
}

uint64_t GraphExecTable::promise(int ordinal, uint64_t free_part, uint64_t want) {
  std::lock_guard lock(mu_);
  uint64_t& promised = promised_[ordinal];
  const uint64_t available = free_part > promised ? free_part - promised : 0;
  const uint64_t granted = std::min(available, want);
  promised += granted;
  return granted;
}

void GraphExecTable::unpromise(int ordinal, uint64_t bytes) {
  std::lock_guard lock(mu_);
  uint64_t& promised = promised_[ordinal];
  promised -= std::min(promised, bytes);
}

}  // namespace egpu::shim
