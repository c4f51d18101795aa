// What every synchronising wrapper does around the real call: the process is
// "asking" while it blocks (busy), the open tails of its streams get a marker
// first (so the sync completes them and their device time is measured, not
// estimated), and completed markers are harvested afterwards.
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

// Which streams the call waits for.
struct SyncScope {
  bool one_stream;  // false: the device (context, event, synchronous copy)
  CUstream stream;
  DefaultStream zero_means;
};

inline SyncScope device_scope() {
  return {false, nullptr, DefaultStream::kLegacy};
}
inline SyncScope stream_scope(CUstream stream, DefaultStream zero_means) {
  return {true, stream, zero_means};
}

template <typename RealSync>
CUresult paced_sync(RealId id, SyncScope scope, RealSync&& sync) noexcept {
  // It waits, for the stream locks and in the driver's sync, inside a
  // noexcept path and a catch-all (see NoCancelScope). A sync costs far
  // more than this.
  const NoCancelScope no_cancel;
  ProcessState* s = process_state();
  note_call(id);
  if (s == nullptr || !s->usable()) return sync();
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  Attachment* a = nullptr;
  bool counted = false;
  try {
    GpuBinding* b = s->current_binding();
    a = b != nullptr ? b->attachment() : nullptr;
    // No attachment, or a capture forbids events (capture_state.h): the
    // call goes through without the pacer's markers.
    if (a == nullptr || capture_state().events_forbidden()) {
      called = true;
      return result = sync();
    }
    a->me.begin_wait();
    counted = true;
    const uint64_t token = thread_token();
    pacing::Charge charge;
    if (scope.one_stream) {
      if (pacing::StreamPacer* p = find_stream_pacer(*b, scope.stream, scope.zero_means)) {
        std::lock_guard lock(p->lock());
        charge += p->close_tail(launch_clock_ns(), token);
      }
    } else {
      charge += b->pacer().close_tails(launch_clock_ns(), token);
    }
    // While blocked here this process is not polling: what it says now is
    // what the agent follows if a handover waits for its tail (see
    // GpuArbiter::tick), so it must not be a launch-time figure gone stale.
    publish_inflight(*a, b->pacer().queued_ns());
    called = true;
    result = sync();
    charge += b->pacer().poll_all(launch_clock_ns(), token, /*close_tails=*/false);
    add_charge(*a, charge);
    // The agent waits for a long queued tail to drain before it hands the
    // slice over; after a sync it is (mostly) gone.
    const int64_t queued = b->pacer().queued_ns();
    publish_inflight(*a, queued);
    if (queued <= 0) {
      note_idle(*a);
      count_burst(b->burst(), *a, launch_clock_ns(), b->reports().from_program());
    }
    counted = false;
    a->me.end_wait();
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a synchronising call: passing it through");
    if (counted) a->me.end_wait();
    return called ? result : sync();
  }
}

}  // namespace egpu::shim
