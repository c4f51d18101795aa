// What every launch wrapper does around the real launch. The fast path: this
// instance holds the slice and its queued device time is under the limit ->
// a few atomic loads, a clock read and the stream's marker bookkeeping, no
// syscall and no shared lock. Anything else goes to admit_launch().
#pragma once

#include "shim/call_counters.h"
#include "shim/capture_state.h"
#include "shim/fast_clock.h"
#include "shim/launch_admission.h"
#include "shim/log.h"
#include "shim/no_cancel_scope.h"
#include "shim/process_state.h"
#include "shim/stream_lookup.h"

namespace egpu::shim {

template <typename RealLaunch>
CUresult paced_launch(RealId id, CUstream stream, DefaultStream zero_means,
                      RealLaunch&& launch) noexcept {
  // The driver's launch may sleep at a cancellation point (a full queue):
  // acted on there, the unwind would meet this noexcept path and abort the
  // program (see NoCancelScope). It waits for the thread's next one.
  const NoCancelScope no_cancel;
  ProcessState* s = process_state();
  note_call(id);
  if (s == nullptr || !s->usable()) return launch();
  // Into a capturing stream: a graph node, nothing runs (capture_state.h).
  if (capture_state().capturing(capture_key(stream, zero_means == DefaultStream::kPerThread))) {
    return launch();
  }
  bool launched = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    GpuBinding* b = s->current_binding();
    if (b == nullptr) {
      launched = true;
      return result = launch();
    }
    const int64_t now = launch_clock_ns();
    Attachment* a = s->ensure_attached(*b, now);
    if (a == nullptr) {
      // Unattached: the fail mode was said at attach; an orphan has no share.
      if (s->refuses_unattached() || b->link() == Link::kOrphaned) return CUDA_ERROR_NOT_PERMITTED;
      launched = true;
      return result = launch();
    }
    // A launch that opens a burst of work: its wait at the gate is part of it.
    const bool opening = b->burst().opening();
    const uint64_t throttled_before = opening ? a->me.throttled_ns() : 0;
    sync_inflight_bound(*b, *a);
    // An orphan (its slot given to another instance) is caught by the
    // periodic check, within kCheckPeriodNs: not a load on every launch.
    if (shm::slice_holder(*a->gpu) != a->gpu_slot || !b->pacer().under_limit() ||
        b->check_due(now)) {
      a = admit_launch(*s, *b, a);
      if (a == nullptr) return CUDA_ERROR_NOT_PERMITTED;  // orphaned
    }
    // No events while a capture forbids them: gated, not paced.
    pacing::StreamPacer* paced =
        capture_state().events_forbidden() ? nullptr : find_stream_pacer(*b, stream, zero_means);
    pacing::Charge charge;
    if (paced != nullptr) {
      std::lock_guard lock(paced->lock());
      charge += paced->before_launch(now);
      launched = true;
      result = launch();
      if (result == CUDA_SUCCESS) charge += paced->after_launch(now);
    } else {
      launched = true;
      result = launch();
    }
    add_charge(*a, charge);
    if (result == CUDA_SUCCESS) {
      note_launch(*a);
      if (opening) b->burst().launched(now, throttled_before);
    }
    publish_inflight(*a, b->pacer().queued_ns());
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in the launch path: launches pass through unpaced");
    return launched ? result : launch();
  }
}

}  // namespace egpu::shim
