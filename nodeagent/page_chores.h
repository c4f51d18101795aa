// PageChores: what the agent does to a file a job owns, off the agent's
// thread. An instance page is its user's file, and the operations that
// change it (ftruncate, unlink, rename, chown) take its inode lock, which
// the user can hold for as long as it likes: a write() into the page from a
// buffer on a FUSE file whose daemon never answers holds it in the kernel.
// On the agent's only thread that would stop every GPU's ticks (the shims'
// heartbeat goes stale within a second) and no signal would end it. So
// these run on chore workers (a WorkerPool of kMaxWorkers), and each page
// has at most one chore at a time: a job blocks no more workers than it has
// instances.
#pragma once

#include <cstddef>
#include <functional>

namespace egpu::agent {

class PageChores {
 public:
  static constexpr int kMaxWorkers = 8;

  // Starts the first worker (at the agent's start: a failure is a failed
  // start, not an exception in the event loop).
  static bool start();
  // Runs `chore` on a worker; false (and nothing runs) when it cannot be
  // queued (out of memory). Never blocks on a chore.
  static bool run(std::function<void()> chore) noexcept;
  // Chores queued or running: for tests and the status.
  static std::size_t pending();
};

}  // namespace egpu::agent
