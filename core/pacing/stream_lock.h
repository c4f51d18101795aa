// The lock around one stream's pacing state. The launch path takes it around
// every launch, almost always uncontended: one locked exchange to take it and
// a plain release store to give it back. (std::mutex's unlock is a second
// locked operation, a fifth of the shim's cost per launch.) A waiter spins a
// little, then yields, then sleeps in short steps: the holder may be inside
// the driver's launch, which blocks while the GPU's queue is full.
#pragma once

#include <atomic>

namespace egpu::pacing {

class StreamLock {
 public:
  StreamLock() = default;
  StreamLock(const StreamLock&) = delete;
  StreamLock& operator=(const StreamLock&) = delete;

  void lock() noexcept {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  void lock_contended() noexcept;

  std::atomic<bool> held_{false};
};

}  // namespace egpu::pacing
