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
#pragma once

#include "shim/cuda_api.h"
// after cuda.h:
#include <atomic>
#include <mutex>
#include <vector>

namespace egpu::shim {

class CaptureState {
 public:
  void begin(CUstream stream, CUstreamCaptureMode mode);
  void end(CUstream stream);
  // The fast path: one relaxed load while no capture is open.
  bool capturing(CUstream stream) const {
    return open_.load(std::memory_order_relaxed) != 0 && find(stream);
  }
  bool events_forbidden() const {
    return global_.load(std::memory_order_relaxed) != 0 || thread_unsafe_ != 0;
  }

 private:
  struct Open {
    CUstream stream;
    CUstreamCaptureMode mode;
  };
  bool find(CUstream stream) const;

  std::atomic<int> open_{0};
  std::atomic<int> global_{0};
  static thread_local int thread_unsafe_;  // this thread's thread-local captures
  mutable std::mutex mu_;
  std::vector<Open> streams_;
};

CaptureState& capture_state();

}  // namespace egpu::shim
