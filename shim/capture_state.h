// Stream captures the process has open (CUDA graphs: PyTorch's CUDA graphs,
// torch.compile "reduce-overhead", vLLM). A launch into a capturing stream
// becomes a node of the graph and runs nothing, so it passes the gate and
// the pacer untouched: recording the shim's timing events there would put
// them in the user's graph, and its in-flight estimate would count work
// that never drains. While a capture in global mode is open anywhere in the
// process (or one in thread-local mode on this thread), CUDA refuses event
// queries as unsafe and invalidates the capture: the shim then records and
// queries no events at all, and launches on other streams are gated but not
// paced until it ends. (A job could keep a capture open to run unpaced; it
// can as well patch the shim in its own memory: the shim paces cooperating
// programs, the agent's gate and charges are the boundary.)
//
// Every member is noexcept and allocates nothing: it runs inside the C ABI.
#pragma once

#include "shim/cuda_api.h"
// after cuda.h:
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>

namespace egpu::shim {

class CaptureState {
 public:
  // Called before the driver's BeginCapture, so no thread queries an event
  // once the capture may be open; undo() if the driver refused it.
  void begin(CUstream stream, CUstreamCaptureMode mode) noexcept;
  void undo(CUstream stream) noexcept { drop(stream); }
  // After the driver's EndCapture: the capture is dropped only if the
  // stream no longer captures (EndCapture on the wrong thread leaves it open).
  void end(CUstream stream) noexcept;
  // The stream was destroyed: whatever capture it had is gone.
  void forget(CUstream stream) noexcept { drop(stream); }

  // The fast path: one relaxed load while no capture is open.
  bool capturing(CUstream stream) const noexcept {
    return open_.load(std::memory_order_relaxed) != 0 && find(stream);
  }
  bool events_forbidden() const noexcept {
    return open_.load(std::memory_order_relaxed) != 0 &&
           (global_.load(std::memory_order_relaxed) != 0 || thread_unsafe_ != 0);
  }

 private:
  struct Open {
    CUstream stream = nullptr;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    bool used = false;
  };
  static constexpr std::size_t kMaxOpen = 64;  // beyond: counted, not matched by handle

  bool find(CUstream stream) const noexcept;
  void drop(CUstream stream) noexcept;

  std::atomic<int> open_{0};
  std::atomic<int> global_{0};
  static inline thread_local constinit int thread_unsafe_ = 0;  // this thread's thread-local ones
  mutable std::mutex mu_;
  std::array<Open, kMaxOpen> streams_{};
};

CaptureState& capture_state() noexcept;

}  // namespace egpu::shim
