#include "shim/capture_state.h"

#include "shim/real_functions.h"

namespace egpu::shim {

namespace {

// A default stream's handle names a different stream per thread (or the
// legacy stream every thread shares): captures on them are counted for the
// event rule but their launches are not let through by handle.
bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

// The driver's view; NONE when it cannot say (the capture is then over or
// never was).
CUstreamCaptureStatus driver_status(CUstream stream) {
  const auto is_capturing = EGPU_REAL(cuStreamIsCapturing);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing == nullptr || is_capturing(stream, &status) != CUDA_SUCCESS) {
    return CU_STREAM_CAPTURE_STATUS_NONE;
  }
  return status;
}

}  // namespace

void CaptureState::begin(CUstream stream, CUstreamCaptureMode mode) noexcept {
  const std::lock_guard lock(mu_);
  for (Open& o : streams_) {
    if (!o.used) {
      o = {stream, mode, true};
      break;
    }
  }
  if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_.fetch_add(1, std::memory_order_relaxed);
  if (mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) ++thread_unsafe_;
  open_.fetch_add(1, std::memory_order_relaxed);
}

void CaptureState::end(CUstream stream) noexcept {
  if (driver_status(stream) != CU_STREAM_CAPTURE_STATUS_NONE) return;  // still open
  drop(stream);
}

void CaptureState::drop(CUstream stream) noexcept {
  const std::lock_guard lock(mu_);
  for (Open& o : streams_) {
    if (!o.used || o.stream != stream) continue;
    if (o.mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_.fetch_sub(1, std::memory_order_relaxed);
    // Thread-local captures end on the thread that began them (CUDA's rule).
    if (o.mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && thread_unsafe_ > 0) --thread_unsafe_;
    o = {};
    open_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
}

bool CaptureState::find(CUstream stream) const noexcept {
  if (is_default_stream(stream)) return false;
  {
    const std::lock_guard lock(mu_);
    for (const Open& o : streams_) {
      if (o.used && o.stream == stream) return true;
    }
  }
  // A stream that joined a capture (it waited on an event recorded in a
  // capturing stream: fork-join capture) captures too, and an invalidated
  // capture's launches run nothing either; asking the driver is legal
  // during capture, and only done while one is open.
  return driver_status(stream) != CU_STREAM_CAPTURE_STATUS_NONE;
}

CaptureState& capture_state() noexcept {
  // Never destroyed: launches may run while the process exits.
  static auto* state = new CaptureState();
  return *state;
}

}  // namespace egpu::shim
