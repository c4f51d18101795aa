#include "shim/graph_exec_table.h"

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

}  // namespace egpu::shim
