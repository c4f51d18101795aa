#include "core/pacing/stream_pacer.h"

#include <algorithm>

namespace egpu::pacing {

namespace {
// Spare events kept for reuse by later streams; more are destroyed.
constexpr size_t kMaxSpareEvents = 256;
}  // namespace

StreamPacer::StreamPacer(PacerShared& shared, StreamHandle record_stream, uint64_t owner)
    : shared_(shared),
      stream_(record_stream),
      owner_(owner),
      estimate_(shared.params.estimate_weight) {
  // A new stream most likely runs kernels like the process's other streams.
  const int64_t hint = shared_.per_launch_hint.load(std::memory_order_relaxed);
  if (hint >= 0) estimate_.seed(hint);
  const int64_t limit = shared_.limit_ns.load(std::memory_order_relaxed);
  interval_ = marker_interval(estimate_, limit, shared_.params.max_marker_interval);
  bound_per_launch_ = bound_launch_ns(estimate_, limit);
  publish_step_ = std::max<int64_t>(limit / 64, 1);
}

StreamPacer::~StreamPacer() {
  shared_.queued_ns.fetch_sub(published_queued_, std::memory_order_relaxed);
}

Charge StreamPacer::before_launch_slow(int64_t now) {
  Charge c;
  if (dropped_) return c;
  if (tail_ == 0) {
    // First launch after a marker: if everything recorded so far is complete
    // the stream is empty, and whatever follows starts a new chain.
    if (!pending_.empty()) c += harvest();
    if (pending_.empty()) c += restart_chain();
  } else if (tail_ran_dry(now)) {
    // A pause longer than the queued work: the open tail has most likely run
    // dry. Its end was never marked, so it is charged at the estimate.
    c += harvest();
    if (pending_.empty()) {
      c += expire_tail();
      c += restart_chain();
    }
  }
  publish();
  return c;
}

Charge StreamPacer::after_launch_slow() {
  Charge c;
  if (close_segment()) c += harvest();
  publish();
  queued_at_last_launch_ = published_queued_;
  return c;
}

Charge StreamPacer::poll(int64_t now, uint64_t thread, bool close_open_tail) {
  if (dropped_) return {};
  Charge c = harvest();
  if (tail_ > 0) {
    if (tail_ran_dry(now)) {
      // A marker recorded now would span the idle time since: charge the open
      // tail at the estimate instead and start afresh at the next launch.
      if (pending_.empty()) c += expire_tail();
    } else if (close_open_tail && may_record(thread) && close_segment()) {
      c += harvest();
    }
  }
  publish();
  return c;
}

Charge StreamPacer::close_tail(int64_t now, uint64_t thread) {
  Charge c;
  if (tail_ == 0 || dropped_) return c;
  if (tail_ran_dry(now)) {
    c += harvest();
    if (pending_.empty()) c += expire_tail();
  } else if (may_record(thread)) {
    close_segment();
  }
  publish();
  return c;
}

Charge StreamPacer::expire_tail() {
  Charge c;
  c.estimated_ns = estimate_of(tail_);
  unfinished_ -= std::min<uint64_t>(unfinished_, tail_);
  tail_ = 0;
  return c;
}

Charge StreamPacer::retire() {
  Charge c = harvest();
  c.estimated_ns += estimate_of(unfinished_);
  unfinished_ = 0;
  tail_ = 0;
  drop_base();
  for (const Marker& m : pending_)
    free_events_.push_back(m.event);
  pending_.clear();
  {
    std::lock_guard lock(shared_.spare_mu);
    for (EventHandle e : free_events_) {
      if (shared_.spare_events.size() < kMaxSpareEvents) {
        shared_.spare_events.push_back(e);
      } else {
        shared_.backend.destroy_event(e);
      }
    }
  }
  free_events_.clear();
  publish();
  dropped_ = true;
  return c;
}

void StreamPacer::abandon() {
  base_.reset();
  pending_.clear();
  free_events_.clear();
  tail_ = 0;
  unfinished_ = 0;
  publish();
  dropped_ = true;
}

Charge StreamPacer::harvest() {
  Charge c;
  while (!pending_.empty()) {
    const EventState state = shared_.backend.query(pending_.front().event);
    if (state == EventState::kPending) break;
    if (state == EventState::kFailed) {
      fail_chain();
      break;
    }
    Marker done = pending_.front();
    pending_.pop_front();
    if (shared_.several_streams.load(std::memory_order_relaxed)) {
      done.at = shared_.timeline.locate(done.event);
    }
    if (done.launches > 0) {
      int64_t duration = 0;
      if (base_ && shared_.backend.elapsed_ns(base_->event, done.event, &duration) &&
          duration >= 0) {
        c.measured_ns += shared_.timeline.charge(base_->at, done.at, duration);
        estimate_.add_segment(duration, done.launches);
        shared_.per_launch_hint.store(estimate_.per_launch_ns(), std::memory_order_relaxed);
      } else {
        c.estimated_ns += estimate_of(done.launches);
      }
      unfinished_ -= std::min<uint64_t>(unfinished_, done.launches);
    }
    drop_base();
    base_ = done;
  }
  interval_ = marker_interval(estimate_, shared_.limit_ns.load(std::memory_order_relaxed),
                              shared_.params.max_marker_interval);
  return c;
}

Charge StreamPacer::restart_chain() {
  drop_base();
  EventHandle event = 0;
  if (!take_event(&event)) return {};
  if (shared_.several_streams.load(std::memory_order_relaxed)) {
    shared_.timeline.maybe_record_anchor(stream_);
  }
  if (!shared_.backend.record(event, stream_)) {
    give_event(event);
    return {};
  }
  pending_.push_back(Marker{event, 0, std::nullopt});
  return {};
}

bool StreamPacer::close_segment() {
  if (tail_ == 0 || pending_.size() >= shared_.params.max_pending_markers) return false;
  EventHandle event = 0;
  if (!take_event(&event)) return false;
  if (shared_.several_streams.load(std::memory_order_relaxed)) {
    shared_.timeline.maybe_record_anchor(stream_);
  }
  if (!shared_.backend.record(event, stream_)) {
    give_event(event);
    return false;
  }
  pending_.push_back(Marker{event, tail_, std::nullopt});
  tail_ = 0;
  return true;
}

void StreamPacer::fail_chain() {
  // The events may belong to a broken or destroyed context: never touch them
  // again (a recycled handle could be someone else's event).
  base_.reset();
  pending_.clear();
  free_events_.clear();
  tail_ = 0;
  unfinished_ = 0;
}

void StreamPacer::drop_base() {
  if (base_) give_event(base_->event);
  base_.reset();
}

bool StreamPacer::take_event(EventHandle* event) {
  if (!free_events_.empty()) {
    *event = free_events_.back();
    free_events_.pop_back();
    return true;
  }
  {
    std::lock_guard lock(shared_.spare_mu);
    if (!shared_.spare_events.empty()) {
      *event = shared_.spare_events.back();
      shared_.spare_events.pop_back();
      return true;
    }
  }
  return shared_.backend.create_event(event);
}

void StreamPacer::give_event(EventHandle event) {
  free_events_.push_back(event);
}

int64_t StreamPacer::estimate_of(uint64_t launches) const {
  return static_cast<int64_t>(launches) * estimate_.per_launch_ns();
}

void StreamPacer::publish() {
  const int64_t limit = shared_.limit_ns.load(std::memory_order_relaxed);
  bound_per_launch_ = bound_launch_ns(estimate_, limit);
  publish_step_ = std::max<int64_t>(limit / 64, 1);
  unpublished_ = 0;
  add_published(static_cast<int64_t>(unfinished_) * bound_per_launch_ - published_queued_);
}

}  // namespace egpu::pacing
