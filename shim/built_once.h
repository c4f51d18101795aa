// BuiltOnce: a table built once, in place, by whichever thread first needs
// it, with no lock and no waiting.
//
// A thread that finds another one building the table does not wait for it:
// it is told so (get() returns null) and looks the slow way instead. The
// builder of the shim's tables calls dlsym, which takes the loader's lock;
// a thread running a library's constructor holds that lock and may call
// cuGetProcAddress (a library that initialises CUDA as it loads). Waiting
// there, it would wait for ever for a builder that waits for it. A forked
// child whose parent was building, in a thread the child does not have,
// builds the table again (reset_in_child); a function-local static's guard
// would leave that child waiting for ever.
#pragma once

#include <atomic>

#include "shim/no_cancel_scope.h"

namespace egpu::shim {

template <typename T>
class BuiltOnce {
 public:
  // The table, built by this call if nobody has; null while another thread
  // builds it.
  template <typename Build>
  const T* get(Build&& build) {
    int state = state_.load(std::memory_order_acquire);
    if (state == kReady) return &value_;
    if (state == kEmpty &&
        state_.compare_exchange_strong(state, kBuilding, std::memory_order_acq_rel)) {
      const NoCancelScope no_cancel;  // dlsym may be a cancellation point
      value_ = T{};                   // what a builder gone with a fork left
      build(value_);
      state_.store(kReady, std::memory_order_release);
      return &value_;
    }
    return state == kReady || state_.load(std::memory_order_acquire) == kReady ? &value_ : nullptr;
  }
  // In a forked child: its only thread is not building.
  void reset_in_child() noexcept {
    if (state_.load(std::memory_order_relaxed) == kBuilding) {
      state_.store(kEmpty, std::memory_order_relaxed);
    }
  }

 private:
  static constexpr int kEmpty = 0;
  static constexpr int kBuilding = 1;
  static constexpr int kReady = 2;
  std::atomic<int> state_{kEmpty};
  T value_{};
};

}  // namespace egpu::shim
