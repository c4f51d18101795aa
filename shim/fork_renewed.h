// ForkRenewed: a process-wide object of the shim's, made at first use and
// made again in a forked child (after_fork.h): whatever another thread of the
// parent held of it there (its mutex) stays behind with the old one, which is
// never freed. Constant-initialised, so usable from any wrapper at any time.
#pragma once

#include <atomic>

namespace egpu::shim {

template <typename T, T* (*Make)()>
class ForkRenewed {
 public:
  constexpr ForkRenewed() = default;
  ForkRenewed(const ForkRenewed&) = delete;
  ForkRenewed& operator=(const ForkRenewed&) = delete;

  T& get() {
    T* current = ptr_.load(std::memory_order_acquire);
    if (current != nullptr) return *current;
    T* made = Make();
    if (!ptr_.compare_exchange_strong(current, made, std::memory_order_acq_rel)) {
      delete made;  // another thread was first
      return *current;
    }
    return *made;
  }
  // In a forked child's handler: no lock, no allocation.
  void renew() noexcept { ptr_.store(nullptr, std::memory_order_release); }

 private:
  std::atomic<T*> ptr_{nullptr};
};

}  // namespace egpu::shim
