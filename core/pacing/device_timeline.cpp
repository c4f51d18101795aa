#include "core/pacing/device_timeline.h"

#include <algorithm>

namespace egpu::pacing {

DeviceTimeline::DeviceTimeline(EventBackend& backend, int64_t anchor_renew_ns)
    : backend_(backend), renew_ns_(anchor_renew_ns) {}

void DeviceTimeline::maybe_record_anchor(StreamHandle stream) {
  std::lock_guard lock(mu_);
  if (candidate_index_ >= 0) return;
  if (anchor_index_ >= 0 && latest_ns_ - anchor_ns_ < renew_ns_) return;
  const int index = anchor_index_ == 0 ? 1 : 0;
  if (!created_[index]) {
    if (!backend_.create_event(&events_[index])) return;
    created_[index] = true;
  }
  if (backend_.record(events_[index], stream)) candidate_index_ = index;
}

void DeviceTimeline::resolve_candidate() {
  if (candidate_index_ < 0) return;
  const EventHandle candidate = events_[candidate_index_];
  const EventState state = backend_.query(candidate);
  if (state == EventState::kPending) return;
  if (state == EventState::kFailed) {
    candidate_index_ = -1;  // try again at the next marker
    return;
  }
  int64_t since_anchor = 0;
  if (anchor_index_ >= 0 && backend_.elapsed_ns(events_[anchor_index_], candidate, &since_anchor)) {
    anchor_ns_ += since_anchor;
  } else if (anchor_index_ >= 0) {
    restart_axis();  // the chain to the old anchor is broken
  }
  anchor_index_ = candidate_index_;
  candidate_index_ = -1;
  latest_ns_ = std::max(latest_ns_, anchor_ns_);
}

void DeviceTimeline::restart_axis() {
  ++base_;
  anchor_ns_ = 0;
  latest_ns_ = 0;
  coverage_.clear();
}

std::optional<TimePoint> DeviceTimeline::locate(EventHandle completed) {
  std::lock_guard lock(mu_);
  resolve_candidate();
  if (anchor_index_ < 0) return std::nullopt;
  int64_t since_anchor = 0;
  if (!backend_.elapsed_ns(events_[anchor_index_], completed, &since_anchor)) return std::nullopt;
  const int64_t ns = anchor_ns_ + since_anchor;
  latest_ns_ = std::max(latest_ns_, ns);
  return TimePoint{ns, base_};
}

int64_t DeviceTimeline::charge(const std::optional<TimePoint>& start,
                               const std::optional<TimePoint>& end, int64_t duration_ns) {
  if (duration_ns <= 0) return 0;
  if (!start || !end || start->base != end->base || end->ns <= start->ns) return duration_ns;
  std::lock_guard lock(mu_);
  if (start->base != base_) return duration_ns;
  const int64_t span = end->ns - start->ns;
  const int64_t uncovered = coverage_.add(start->ns, end->ns);
  // The measured duration is exact; the span is the same interval seen through
  // the anchor (float rounding): charge the duration minus what was covered.
  return std::clamp<int64_t>(duration_ns - (span - uncovered), 0, duration_ns);
}

void DeviceTimeline::abandon() {
  std::lock_guard lock(mu_);
  created_[0] = created_[1] = false;
  anchor_index_ = candidate_index_ = -1;
  restart_axis();
}

void DeviceTimeline::destroy_events() {
  std::lock_guard lock(mu_);
  for (int i = 0; i < 2; ++i) {
    if (created_[i]) backend_.destroy_event(events_[i]);
    created_[i] = false;
  }
  anchor_index_ = candidate_index_ = -1;
  restart_axis();
}

}  // namespace egpu::pacing
