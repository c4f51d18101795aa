// Stream captures the process has open (CUDA graphs: PyTorch's CUDA graphs,
// torch.compile "reduce-overhead", vLLM). A launch into a capturing stream
// becomes a node of the graph and runs nothing, so it passes the gate and
// the pacer untouched: recording the shim's timing events there would put
// them in the user's graph, and its in-flight estimate would count work
// that never drains. While a capture in global mode is open anywhere in the
// process (or one in thread-local mode begun by this thread), CUDA refuses
// event queries as unsafe and invalidates the capture: the shim then records
// and queries no events at all, and launches on other streams are gated but
// not paced until it ends. (A job could keep a capture open to run unpaced;
// it can as well patch the shim in its own memory: the shim paces
// cooperating programs, the agent's gate and charges are the boundary.)
//
// A capture the program never ends must not stop pacing for good: one whose
// context was destroyed goes with it (forget_context(): the driver is not
// asked about a destroyed context's streams), a full table drops the
// captures the driver no longer knows, and captures past the table's size
// are counted as global ones and uncounted when a stream the table does not
// hold ends one. A default stream's handle names the calling thread's
// stream: such captures are matched to the thread that began them.
//
// Every member is noexcept and allocates nothing: it runs inside the C ABI.
#pragma once

#include "shim/cuda_api.h"
// after cuda.h:
#include <pthread.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace egpu::shim {

class CaptureState {
 public:
  // What the driver says of a stream's capture; NONE when it cannot say
  // (the capture is then over or never was).
  using StatusProbe = CUstreamCaptureStatus (*)(CUstream) noexcept;
  // The stream's context; null when the driver cannot say.
  using ContextProbe = CUcontext (*)(CUstream) noexcept;
  static constexpr std::size_t kMaxOpen = 64;  // beyond: counted, not matched by handle

  CaptureState(StatusProbe status, ContextProbe context) noexcept
      : status_(status), context_(context) {}

  // Called before the driver's BeginCapture, so no thread queries an event
  // once the capture may be open; then confirm(its result) if the driver
  // opened it, undo(its result) if it refused. (A per-thread default stream
  // is CU_STREAM_PER_THREAD here, whatever handle the caller used.)
  using Ticket = uint64_t;
  Ticket begin(CUstream stream, CUstreamCaptureMode mode) noexcept;
  void confirm(Ticket ticket) noexcept;
  void undo(Ticket ticket) noexcept;
  // After the driver's EndCapture returned `rc`: the capture is dropped only
  // if the stream no longer captures (EndCapture on the wrong thread leaves
  // it open).
  void end(CUstream stream, CUresult rc) noexcept;
  // Before the driver destroys the stream: whatever capture it had is gone.
  void forget(CUstream stream) noexcept;
  // The context was destroyed: its streams' captures went with it.
  void forget_context(CUcontext context) noexcept;

  // The fast path: one relaxed load while no capture is open.
  bool capturing(CUstream stream) const noexcept {
    return open_.load(std::memory_order_relaxed) != 0 && find(stream);
  }
  bool events_forbidden() const noexcept {
    return open_.load(std::memory_order_relaxed) != 0 &&
           (global_.load(std::memory_order_relaxed) != 0 ||
            (thread_local_.load(std::memory_order_relaxed) != 0 && began_thread_local_here()));
  }

 private:
  struct Open {
    CUstream stream = nullptr;
    CUcontext context = nullptr;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    pthread_t thread{};      // the thread that began it (thread-local mode's rule)
    Ticket ticket = 0;       // 0: the slot is free
    bool confirmed = false;  // the driver opened it (until then it may not know it)
  };
  // Tickets of captures the table could not hold (all counted as global).
  static constexpr Ticket kUntracked = ~Ticket{0};

  bool find(CUstream stream) const noexcept;
  bool began_thread_local_here() const noexcept;
  // Drops the confirmed captures the driver no longer knows (a full table).
  void revalidate() noexcept;
  // Under mu_: the entry's counts go and its slot is freed.
  void release(Open& entry) noexcept;
  // Under mu_: the tracked entry of `stream` (a default stream's: this
  // thread's), or null.
  const Open* tracked(CUstream stream) const noexcept;
  Open* tracked(CUstream stream) noexcept {
    return const_cast<Open*>(static_cast<const CaptureState*>(this)->tracked(stream));
  }
  // Under mu_: one capture the table did not hold is over.
  void release_untracked() noexcept;

  StatusProbe status_;
  ContextProbe context_;
  std::atomic<int> open_{0};
  std::atomic<int> global_{0};        // global-mode captures, untracked ones included
  std::atomic<int> thread_local_{0};  // thread-local-mode captures
  int untracked_ = 0;                 // under mu_
  Ticket next_ticket_ = 1;            // under mu_
  mutable std::mutex mu_;
  std::array<Open, kMaxOpen> streams_{};
};

CaptureState& capture_state() noexcept;

// A stream handle as the table keys it: where a null stream means the
// calling thread's per-thread default stream (_ptsz/_ptds calls), that is
// CU_STREAM_PER_THREAD.
inline CUstream capture_key(CUstream stream, bool null_is_per_thread) noexcept {
  return stream == nullptr && null_is_per_thread ? CU_STREAM_PER_THREAD : stream;
}

}  // namespace egpu::shim
