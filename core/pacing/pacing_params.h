// Tunables of the in-flight bound and the sparse device-time measurement.
#pragma once

#include <cstdint>

namespace egpu::pacing {

struct PacingParams {
  // Device time a process may have queued on one GPU (GpuPage.inflight_limit_ns).
  int64_t inflight_limit_ns = 2'000'000;
  // Launches between two markers on a stream: adapted in 1..max_marker_interval
  // so that markers are about inflight_limit_ns / 4 of device time apart.
  uint32_t max_marker_interval = 64;
  // Markers a stream may have outstanding (events in flight) at once.
  uint32_t max_pending_markers = 16;
  // Weight of a new segment in the per-launch estimate (EWMA).
  double estimate_weight = 0.25;
  // A pause in launching longer than the stream's queued estimate plus this
  // means the stream ran dry: the chain restarts so the pause is never charged.
  int64_t idle_gap_ns = 200'000;
  // A new timeline anchor is recorded after this much device time, so that
  // float elapsed times against it stay precise (~0.1 us).
  int64_t anchor_renew_ns = 1'000'000'000;
};

}  // namespace egpu::pacing
