// DeviceTimeline: puts the markers of all of a process's streams on one GPU on a
// common device-time axis, so overlapping segments are charged once (Coverage).
// Times are measured against an anchor event; a new anchor is chained to the
// old one every `anchor_renew_ns` so float elapsed times stay precise.
// Thread-safe (an internal lock; callers may hold a stream lock).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "core/pacing/coverage.h"
#include "core/pacing/event_backend.h"

namespace egpu::pacing {

// A point on the timeline. `base` changes when the axis had to be restarted
// (an anchor was lost): points of different bases are not comparable.
struct TimePoint {
  int64_t ns;
  uint64_t base;
};

class DeviceTimeline {
 public:
  DeviceTimeline(EventBackend& backend, int64_t anchor_renew_ns);
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  // Records a new anchor on `stream` if one is wanted (none yet, or the current
  // one is old). Called by streams right before they record a marker.
  void maybe_record_anchor(StreamHandle stream);
  // Position of a completed event; none without an anchor.
  std::optional<TimePoint> locate(EventHandle completed);
  // Charges a measured segment of `duration_ns` between two located markers:
  // returns the part not charged before (the whole duration when the points
  // are unknown or on different bases).
  int64_t charge(const std::optional<TimePoint>& start, const std::optional<TimePoint>& end,
                 int64_t duration_ns);
  // The context is gone: forget the events without calling the backend.
  void abandon();
  // Destroys the events (an owner that outlives nothing it measured: tests).
  void destroy_events();

 private:
  void resolve_candidate();  // lock held
  void restart_axis();       // lock held

  EventBackend& backend_;
  const int64_t renew_ns_;
  std::mutex mu_;
  EventHandle events_[2] = {0, 0};
  bool created_[2] = {false, false};
  int anchor_index_ = -1;     // which event is the anchor, -1 none
  int candidate_index_ = -1;  // which event is recorded and not yet resolved
  int64_t anchor_ns_ = 0;
  int64_t latest_ns_ = 0;
  uint64_t base_ = 1;
  Coverage coverage_;
};

}  // namespace egpu::pacing
