#include "nodeagent/worker_pool.h"

#include <thread>
#include <utility>

namespace egpu::agent {

bool WorkerPool::start() noexcept {
  try {
    std::lock_guard lock(mu_);
    if (workers_ == 0) start_worker();
    return true;
  } catch (...) {
    return false;
  }
}

bool WorkerPool::run(std::function<void()> task) noexcept {
  try {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
    // More queued than idle workers to take it (one may be stuck): another,
    // up to the cap. A notified worker still counts as waiting until it
    // takes its task, so compare with the queue.
    if (queue_.size() > static_cast<std::size_t>(waiting_) && workers_ < max_workers_) {
      try {
        start_worker();
      } catch (...) {
        // Out of threads: the workers already running take it.
        if (workers_ == 0) {
          queue_.pop_back();
          return false;
        }
      }
    }
  } catch (...) {
    return false;
  }
  cv_.notify_one();
  return true;
}

std::size_t WorkerPool::pending() {
  std::lock_guard lock(mu_);
  return queue_.size() + static_cast<std::size_t>(busy_);
}

void WorkerPool::start_worker() {
  std::thread([this] { loop(); }).detach();
  ++workers_;
}

void WorkerPool::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      ++waiting_;
      cv_.wait(lock, [this] { return !queue_.empty(); });
      --waiting_;
      task = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    task();
    std::lock_guard lock(mu_);
    --busy_;
  }
}

}  // namespace egpu::agent
