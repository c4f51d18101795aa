// WorkerPool: threads that run what the agent's own thread must not wait
// for (a close or an unlink that a user can make block). A task that blocks
// holds one worker; another starts when every worker is busy, up to the
// pool's cap, and past it tasks wait in the queue. Workers live as long as
// the agent (detached): a pool is never destroyed, and a worker never exits
// (disposal processes a closer starts die with their starting thread,
// PR_SET_PDEATHSIG).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace egpu::agent {

class WorkerPool {
 public:
  explicit WorkerPool(int max_workers) : max_workers_(max_workers) {}
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts the first worker (at the agent's start: a failure is a failed
  // start, not an exception in the event loop).
  bool start() noexcept;
  // Queues `task` (tasks do not throw); false, and nothing runs, when it
  // cannot be queued (out of memory or threads). Never waits for a task.
  bool run(std::function<void()> task) noexcept;
  // Tasks queued or running.
  std::size_t pending();

 private:
  void start_worker();
  void loop();

  const int max_workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int workers_ = 0;
  int busy_ = 0;
  int waiting_ = 0;
};

}  // namespace egpu::agent
