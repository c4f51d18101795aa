// UserPageGuard: keeps the agent alive when a job truncates a page the agent
// has mapped. An instance page is a file owned by the job's user (its shims
// must write it), so the user may ftruncate it at any time; the agent's next
// access to its mapping would then raise SIGBUS and kill the agent, and with
// it every job on the node.
//
// The agent watches each such mapping. On a SIGBUS inside one, the handler
// maps zeroed anonymous memory over it (mmap is async-signal-safe) and marks it
// broken; the faulting access is retried and reads zeros, and the agent replaces
// the page at its next look (InstanceRuntime). A SIGBUS anywhere else is a real
// fault: the previous disposition runs (default: the agent dies with a core).
// This is what Wayland compositors do for client-owned shared memory pools.
//
// A sealed memfd (F_SEAL_SHRINK) would forbid the truncation outright, but it
// has no path: an agent that restarts could not find its jobs' pages again.
#pragma once

#include <cstddef>

#include "core/util/result.h"

namespace egpu::agent {

class UserPageGuard {
 public:
  // Installs the SIGBUS handler; idempotent.
  static Status install();

  // Watches [addr, addr + length) until the guard is destroyed or released.
  // An unwatched guard (default, or when the table is full) protects nothing.
  static Result<UserPageGuard> watch(void* addr, size_t length);

  UserPageGuard() = default;
  UserPageGuard(UserPageGuard&& o) noexcept : entry_(o.entry_) { o.entry_ = -1; }
  UserPageGuard& operator=(UserPageGuard&& o) noexcept;
  UserPageGuard(const UserPageGuard&) = delete;
  UserPageGuard& operator=(const UserPageGuard&) = delete;
  ~UserPageGuard() { release(); }

  // True once a truncation was caught inside the watched range: it now holds
  // zeroed private memory, no longer the file.
  bool broken() const;
  void release();

  // How many mappings can be watched at once (a node has at most a few
  // hundred instances).
  static constexpr int kMaxWatched = 4096;

 private:
  explicit UserPageGuard(int entry) : entry_(entry) {}
  int entry_ = -1;
};

}  // namespace egpu::agent
