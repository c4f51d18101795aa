#include "shim/capture_state.h"

#include <algorithm>

#include "shim/real_functions.h"

namespace egpu::shim {

thread_local int CaptureState::thread_unsafe_ = 0;

namespace {

// A default stream's handle names a different stream per thread (or the
// legacy stream every thread shares): captures on them are counted for the
// event rule but their launches are not let through by handle.
bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

}  // namespace

void CaptureState::begin(CUstream stream, CUstreamCaptureMode mode) {
  const std::lock_guard lock(mu_);
  streams_.push_back({stream, mode});
  if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_.fetch_add(1, std::memory_order_relaxed);
  if (mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) ++thread_unsafe_;
  open_.fetch_add(1, std::memory_order_relaxed);
}

void CaptureState::end(CUstream stream) {
  const std::lock_guard lock(mu_);
  const auto it = std::find_if(streams_.begin(), streams_.end(),
                               [stream](const Open& o) { return o.stream == stream; });
  if (it == streams_.end()) return;  // not one we saw begin (or ended already)
  if (it->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_.fetch_sub(1, std::memory_order_relaxed);
  // Thread-local captures end on the thread that began them (CUDA's rule).
  if (it->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && thread_unsafe_ > 0) --thread_unsafe_;
  streams_.erase(it);
  open_.fetch_sub(1, std::memory_order_relaxed);
}

bool CaptureState::find(CUstream stream) const {
  if (is_default_stream(stream)) return false;
  {
    const std::lock_guard lock(mu_);
    if (std::any_of(streams_.begin(), streams_.end(),
                    [stream](const Open& o) { return o.stream == stream; })) {
      return true;
    }
  }
  // A stream that joined a capture (it waited on an event recorded in a
  // capturing stream: fork-join capture) captures too; asking the driver is
  // legal during capture, and only done while one is open.
  const auto is_capturing = EGPU_REAL(cuStreamIsCapturing);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return is_capturing != nullptr && is_capturing(stream, &status) == CUDA_SUCCESS &&
         status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

CaptureState& capture_state() {
  // Never destroyed: launches may run while the process exits.
  static auto* state = new CaptureState();
  return *state;
}

}  // namespace egpu::shim
