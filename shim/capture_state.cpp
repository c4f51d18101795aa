#include "shim/capture_state.h"

namespace egpu::shim {

namespace {

// A default stream's handle names a different stream per thread (or the
// legacy stream every thread shares): captures on them are counted for the
// event rule but their launches are not let through by handle, and only the
// thread that began one can match it or ask the driver about it.
bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

// EndCapture left the stream out of capture mode: it ended the capture,
// unless it refused the call (no capture there, or not a stream at all).
bool ended_a_capture(CUresult rc) {
  return rc != CUDA_ERROR_ILLEGAL_STATE && rc != CUDA_ERROR_INVALID_VALUE &&
         rc != CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace

CaptureState::Ticket CaptureState::begin(CUstream stream, CUstreamCaptureMode mode) noexcept {
  // A full table may hold captures whose stream the driver no longer knows.
  if (open_.load(std::memory_order_relaxed) >= static_cast<int>(kMaxOpen)) revalidate();
  const CUcontext context = context_(stream);  // the driver is never called under mu_
  const std::lock_guard lock(mu_);
  open_.fetch_add(1, std::memory_order_relaxed);
  for (Open& o : streams_) {
    if (o.ticket != 0) continue;
    o = {stream, context, mode, pthread_self(), next_ticket_++, false};
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_.fetch_add(1, std::memory_order_relaxed);
    if (mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
      thread_local_.fetch_add(1, std::memory_order_relaxed);
    return o.ticket;
  }
  // Not matched by handle later: counted as the strictest mode until a
  // capture the table does not hold ends.
  ++untracked_;
  global_.fetch_add(1, std::memory_order_relaxed);
  return kUntracked;
}

void CaptureState::confirm(Ticket ticket) noexcept {
  const std::lock_guard lock(mu_);
  for (Open& o : streams_) {
    if (o.ticket == ticket) o.confirmed = true;
  }
}

void CaptureState::undo(Ticket ticket) noexcept {
  const std::lock_guard lock(mu_);
  if (ticket == kUntracked) {
    release_untracked();
    return;
  }
  for (Open& o : streams_) {
    if (o.ticket == ticket) release(o);
  }
}

void CaptureState::end(CUstream stream, CUresult rc) noexcept {
  if (open_.load(std::memory_order_relaxed) == 0) return;
  if (status_(stream) != CU_STREAM_CAPTURE_STATUS_NONE) return;  // still open
  const std::lock_guard lock(mu_);
  if (Open* o = tracked(stream)) {
    release(*o);
  } else if (ended_a_capture(rc)) {
    release_untracked();
  }
}

void CaptureState::forget(CUstream stream) noexcept {
  if (open_.load(std::memory_order_relaxed) == 0) return;
  // Asked before taking the lock: the driver is never called under it.
  const bool capturing = status_(stream) != CU_STREAM_CAPTURE_STATUS_NONE;
  const std::lock_guard lock(mu_);
  if (Open* o = tracked(stream)) {
    release(*o);
  } else if (capturing) {
    release_untracked();
  }
}

void CaptureState::forget_context(CUcontext context) noexcept {
  if (context == nullptr || open_.load(std::memory_order_relaxed) == 0) return;
  const std::lock_guard lock(mu_);
  for (Open& o : streams_) {
    if (o.ticket != 0 && o.context == context) release(o);
  }
}

void CaptureState::revalidate() noexcept {
  std::array<Open, kMaxOpen> snapshot;
  {
    const std::lock_guard lock(mu_);
    snapshot = streams_;
  }
  const pthread_t self = pthread_self();
  for (Open& o : snapshot) {
    // Not yet opened (the driver would not know it yet), or a default
    // stream of another thread: kept.
    const bool askable =
        o.confirmed && (!is_default_stream(o.stream) || pthread_equal(o.thread, self) != 0);
    if (o.ticket == 0 || !askable || status_(o.stream) != CU_STREAM_CAPTURE_STATUS_NONE) {
      o.ticket = 0;  // kept
    }
  }
  const std::lock_guard lock(mu_);
  for (const Open& gone : snapshot) {
    if (gone.ticket == 0) continue;
    for (Open& o : streams_) {
      if (o.ticket == gone.ticket) release(o);  // unless it ended meanwhile
    }
  }
}

void CaptureState::release(Open& entry) noexcept {
  if (entry.mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_.fetch_sub(1, std::memory_order_relaxed);
  if (entry.mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    thread_local_.fetch_sub(1, std::memory_order_relaxed);
  entry = {};
  open_.fetch_sub(1, std::memory_order_relaxed);
}

const CaptureState::Open* CaptureState::tracked(CUstream stream) const noexcept {
  const bool per_thread = is_default_stream(stream);
  const pthread_t self = pthread_self();
  for (const Open& o : streams_) {
    if (o.ticket != 0 && o.stream == stream && (!per_thread || pthread_equal(o.thread, self) != 0))
      return &o;
  }
  return nullptr;
}

void CaptureState::release_untracked() noexcept {
  if (untracked_ == 0) return;
  --untracked_;
  global_.fetch_sub(1, std::memory_order_relaxed);
  open_.fetch_sub(1, std::memory_order_relaxed);
}

bool CaptureState::find(CUstream stream) const noexcept {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return false;  // never captures
  bool being_opened = false;
  {
    const std::lock_guard lock(mu_);
    if (const Open* o = tracked(stream)) {
      if (o->confirmed) return true;
      being_opened = true;  // this thread's own, where a default stream
    }
  }
  // A capture being opened is taken on the driver's word: one the driver
  // refuses (a BeginCapture that fails, however often a program calls it)
  // must not let the stream's launches past the gate meanwhile. A stream
  // that joined a capture (it waited on an event recorded in a capturing
  // stream: fork-join capture) captures too, and an invalidated capture's
  // launches run nothing either; asking the driver is legal during
  // capture, and only done while one is open. (Not for another thread's
  // per-thread stream: the driver would answer for this thread's.)
  if (stream == CU_STREAM_PER_THREAD && !being_opened) return false;
  return status_(stream) != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool CaptureState::began_thread_local_here() const noexcept {
  const pthread_t self = pthread_self();
  const std::lock_guard lock(mu_);
  for (const Open& o : streams_) {
    if (o.ticket != 0 && o.mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        pthread_equal(o.thread, self) != 0) {
      return true;
    }
  }
  return false;
}

}  // namespace egpu::shim
