// StreamPacer: the marker chain of one stream. Every K launches a marker event
// is recorded after the launch; when two consecutive markers have completed,
// the device time between them is charged and teaches the per-launch estimate
// E. Launches not yet known complete x E is the stream's queued device time,
// which feeds the process's in-flight bound.
//
// A stream that ran dry (its last marker complete when the next launch comes,
// or a pause in launching longer than its queued work) restarts its chain with
// a marker recorded BEFORE the next launch, so idle time is never charged.
//
// Not thread-safe by itself: callers hold lock() around every call (the shim
// holds it across before_launch, the real launch and after_launch).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "core/pacing/charge.h"
#include "core/pacing/device_timeline.h"
#include "core/pacing/event_backend.h"
#include "core/pacing/launch_estimate.h"
#include "core/pacing/pacing_params.h"
#include "core/pacing/stream_lock.h"

namespace egpu::pacing {

// What the streams of one GPU share (owned by DevicePacer).
struct PacerShared {
  PacerShared(EventBackend& b, const PacingParams& p)
      : backend(b), params(p), timeline(b, p.anchor_renew_ns), limit_ns(p.inflight_limit_ns) {}
  EventBackend& backend;
  const PacingParams params;
  DeviceTimeline timeline;
  std::atomic<int64_t> limit_ns;
  std::atomic<int64_t> queued_ns{0};         // sum of the streams' queued estimates
  std::atomic<int64_t> per_launch_hint{-1};  // latest estimate of any stream, -1 none
  // Only with two or more streams can segments overlap: a single stream skips
  // the timeline (one driver call less per marker).
  std::atomic<bool> several_streams{false};
  // Events of retired streams, reused before creating new ones.
  std::mutex spare_mu;
  std::vector<EventHandle> spare_events;
};

class StreamPacer {
 public:
  // `record_stream` is what markers are recorded on; `owner` names the thread
  // that alone may record on it (a per-thread default stream), 0 = any thread.
  StreamPacer(PacerShared& shared, StreamHandle record_stream, uint64_t owner);
  StreamPacer(const StreamPacer&) = delete;
  StreamPacer& operator=(const StreamPacer&) = delete;
  // Never calls the backend: events still held are leaked (see retire()).
  ~StreamPacer();

  StreamLock& lock() { return lock_; }

  // Around one launch on the stream (`now`: any monotonic nanosecond clock,
  // the same for every call). The common case is inline and touches nothing
  // shared but one atomic add.
  Charge before_launch(int64_t now) {
    if (tail_ > 0 && !tail_ran_dry(now)) return {};
    return before_launch_slow(now);
  }
  Charge after_launch(int64_t now) {
    if (dropped_) return {};
    ++tail_;
    ++unfinished_;
    last_launch_ns_ = now;
    if (tail_ >= interval_) return after_launch_slow();
    // The process-wide sum moves in steps of publish_step_, not per launch:
    // a locked add per launch was a fifth of the shim's cost, and the bound
    // it feeds is a few ms.
    unpublished_ += bound_per_launch_;
    if (unpublished_ >= publish_step_) flush_unpublished();
    queued_at_last_launch_ = published_queued_ + unpublished_;
    return {};
  }
  // Non-blocking progress: harvests completed markers and lets a long-idle
  // tail go at the estimate. With `close_open_tail`, also closes the open tail with
  // a marker when `thread` may record on the stream (so that a waiter at the
  // in-flight bound has something to wait for).
  Charge poll(int64_t now, uint64_t thread, bool close_open_tail = true);
  // Before a synchronising call: closes the open tail so that the sync
  // completes a marker and the next poll measures the launches exactly (or,
  // when the tail already ran dry, charges it at the estimate).
  Charge close_tail(int64_t now, uint64_t thread);
  // The stream is destroyed: charges what is left at the estimate and returns
  // its events to the shared spare pool. Every call after it does nothing.
  Charge retire();
  // The context is gone: forgets every event without calling the backend.
  // Every call after it does nothing.
  void abandon();

  int64_t queued_ns() const { return published_queued_ + unpublished_; }
  uint32_t marker_interval_now() const { return interval_; }
  const LaunchEstimate& estimate() const { return estimate_; }

 private:
  struct Marker {
    EventHandle event;
    uint32_t launches;  // launches between the previous marker and this one
    std::optional<TimePoint> at;
  };

  bool may_record(uint64_t thread) const { return owner_ == 0 || owner_ == thread; }
  Charge before_launch_slow(int64_t now);
  Charge after_launch_slow();
  Charge harvest();
  bool tail_ran_dry(int64_t now) const {
    return now - last_launch_ns_ > queued_at_last_launch_ + shared_.params.idle_gap_ns;
  }
  Charge expire_tail();
  void flush_unpublished() {
    add_published(unpublished_);
    unpublished_ = 0;
  }
  void add_published(int64_t delta) {
    if (delta == 0) return;
    shared_.queued_ns.fetch_add(delta, std::memory_order_relaxed);
    published_queued_ += delta;
  }
  Charge restart_chain();
  bool close_segment();
  void fail_chain();
  void drop_base();
  bool take_event(EventHandle* event);
  void give_event(EventHandle event);
  int64_t estimate_of(uint64_t launches) const;
  void publish();

  PacerShared& shared_;
  const StreamHandle stream_;
  const uint64_t owner_;
  StreamLock lock_;
  std::optional<Marker> base_;  // newest completed marker: segments start here
  std::deque<Marker> pending_;  // recorded, not yet seen complete, oldest first
  uint32_t tail_ = 0;           // launches after the newest marker
  uint64_t unfinished_ = 0;     // launches not known complete
  // Retired or abandoned: out of its DevicePacer, polled by nobody. A thread
  // that found it just before may still launch through it; it counts
  // nothing, or what it counted would stay in the GPU's queued sum.
  bool dropped_ = false;
  LaunchEstimate estimate_;
  uint32_t interval_ = 1;
  int64_t last_launch_ns_ = 0;
  int64_t queued_at_last_launch_ = 0;
  int64_t published_queued_ = 0;
  int64_t bound_per_launch_ = 0;  // bound_launch_ns() as of the last publish()
  // Queued device time of launches since the last publish() not yet added to
  // the process's sum: less than publish_step_ (a 64th of the in-flight
  // limit), so the bound lags by at most that per stream.
  int64_t unpublished_ = 0;
  int64_t publish_step_ = 1;
  std::vector<EventHandle> free_events_;
};

}  // namespace egpu::pacing
