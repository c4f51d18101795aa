// Which CUDA device the calling thread's current context is on, for processes
// with more than one managed GPU. cuCtxGetCurrent per call; the context's
// device is looked up once (cuCtxGetDevice) and cached per thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "shim/cuda_api.h"

namespace egpu::shim {

// The handle of `dev`'s primary context while it is active, else null.
// Retaining an active primary and releasing it again can neither create nor
// destroy it.
CUcontext active_primary(CUdevice dev) noexcept;

class ContextDevices {
 public:
  // The device ordinal of the current context; -1 without one.
  int current_ordinal();
  // A context was destroyed: its handle may come back for another device.
  void invalidate();

 private:
  std::mutex mu_;
  std::unordered_map<CUcontext, int> devices_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace egpu::shim
