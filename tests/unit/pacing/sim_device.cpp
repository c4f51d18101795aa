#include "sim_device.h"

#include <algorithm>

namespace egpu::pacing::testing {

int64_t& SimDevice::engine_free(StreamHandle stream) {
  return engines_ == Engines::kSerial ? serial_free_ : engine_free_[stream];
}

void SimDevice::launch(StreamHandle stream, int64_t duration_ns) {
  std::lock_guard lock(mu_);
  int64_t& engine = engine_free(stream);
  const int64_t start = std::max({now_, engine, stream_free_[stream]});
  const int64_t end = start + duration_ns;
  engine = end;
  stream_free_[stream] = end;
  kernels_.push_back(Kernel{start, end, stream});
}

int64_t SimDevice::busy_until_now() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const Kernel& k : kernels_) {
    const int64_t end = std::min(k.end, now_);
    if (end > k.start) spans.emplace_back(k.start, end);
  }
  std::sort(spans.begin(), spans.end());
  int64_t total = 0;
  int64_t covered_to = INT64_MIN;
  for (const auto& [s, e] : spans) {
    const int64_t from = std::max(s, covered_to);
    if (e > from) total += e - from;
    covered_to = std::max(covered_to, e);
  }
  return total;
}

int64_t SimDevice::queued_now(StreamHandle stream) const {
  std::lock_guard lock(mu_);
  int64_t total = 0;
  for (const Kernel& k : kernels_) {
    if (k.stream == stream && k.end > now_) total += k.end - std::max(k.start, now_);
  }
  return total;
}

int64_t SimDevice::queued_now() const {
  std::lock_guard lock(mu_);
  int64_t total = 0;
  for (const Kernel& k : kernels_) {
    if (k.end > now_) total += k.end - std::max(k.start, now_);
  }
  return total;
}

int64_t SimDevice::drained_at() const {
  std::lock_guard lock(mu_);
  int64_t last = now_;
  for (const Kernel& k : kernels_)
    last = std::max(last, k.end);
  return last;
}

bool SimDevice::create_event(EventHandle* event) {
  std::lock_guard lock(mu_);
  events_.push_back(Event{});
  *event = events_.size();  // 1-based: 0 is never a valid handle
  ++created_;
  return true;
}

void SimDevice::destroy_event(EventHandle event) {
  std::lock_guard lock(mu_);
  if (event == 0 || event > events_.size() || !events_[event - 1].live) return;
  events_[event - 1].live = false;
  ++destroyed_;
}

bool SimDevice::record(EventHandle event, StreamHandle stream) {
  std::lock_guard lock(mu_);
  if (event == 0 || event > events_.size() || !events_[event - 1].live) return false;
  Event& e = events_[event - 1];
  e.recorded = true;
  // Serial: behind everything queued; per stream: behind the stream's work.
  e.completes_at =
      std::max(now_, engines_ == Engines::kSerial ? serial_free_ : stream_free_[stream]);
  ++records_;
  return true;
}

EventState SimDevice::query(EventHandle event) {
  std::lock_guard lock(mu_);
  ++queries_;
  if (fail_queries_) return EventState::kFailed;
  if (event == 0 || event > events_.size() || !events_[event - 1].live) {
    return EventState::kFailed;
  }
  const Event& e = events_[event - 1];
  return !e.recorded || e.completes_at <= now_ ? EventState::kComplete : EventState::kPending;
}

bool SimDevice::elapsed_ns(EventHandle start, EventHandle end, int64_t* ns) {
  std::lock_guard lock(mu_);
  for (EventHandle h : {start, end}) {
    if (h == 0 || h > events_.size() || !events_[h - 1].live || !events_[h - 1].recorded ||
        events_[h - 1].completes_at > now_) {
      return false;
    }
  }
  *ns = events_[end - 1].completes_at - events_[start - 1].completes_at;
  return true;
}

}  // namespace egpu::pacing::testing
