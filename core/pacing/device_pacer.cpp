#include "core/pacing/device_pacer.h"

#include <vector>

namespace egpu::pacing {

DevicePacer::DevicePacer(EventBackend& backend, const PacingParams& params, size_t max_streams)
    : shared_(backend, params), max_streams_(max_streams) {}

DevicePacer::~DevicePacer() = default;

std::shared_ptr<StreamPacer> DevicePacer::stream(uint64_t key, StreamHandle record_stream,
                                                 uint64_t owner) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(key);
  if (it != streams_.end()) return it->second;
  if (streams_.size() >= max_streams_) return nullptr;
  auto created = std::make_shared<StreamPacer>(shared_, record_stream, owner);
  streams_.emplace(key, created);
  shared_.several_streams.store(streams_.size() > 1, std::memory_order_relaxed);
  return created;
}

Charge DevicePacer::retire(uint64_t key) {
  std::shared_ptr<StreamPacer> gone;
  {
    std::lock_guard lock(mu_);
    auto it = streams_.find(key);
    if (it == streams_.end()) return {};
    gone = std::move(it->second);
    streams_.erase(it);
    shared_.several_streams.store(streams_.size() > 1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  std::lock_guard stream_lock(gone->lock());
  return gone->retire();
}

void DevicePacer::abandon_all() {
  std::unordered_map<uint64_t, std::shared_ptr<StreamPacer>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(streams_);
    shared_.several_streams.store(false, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  for (auto& [key, s] : gone) {
    std::lock_guard stream_lock(s->lock());
    s->abandon();
  }
  {
    std::lock_guard lock(shared_.spare_mu);
    shared_.spare_events.clear();
  }
  shared_.timeline.abandon();
}

std::vector<std::shared_ptr<StreamPacer>> DevicePacer::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<StreamPacer>> out;
  out.reserve(streams_.size());
  for (const auto& [key, s] : streams_)
    out.push_back(s);
  return out;
}

Charge DevicePacer::poll_all(int64_t now, uint64_t thread, bool close_tails) {
  Charge c;
  for (const auto& s : snapshot()) {
    std::lock_guard stream_lock(s->lock());
    c += s->poll(now, thread, close_tails);
  }
  return c;
}

Charge DevicePacer::close_tails(int64_t now, uint64_t thread) {
  Charge c;
  for (const auto& s : snapshot()) {
    std::lock_guard stream_lock(s->lock());
    c += s->close_tail(now, thread);
  }
  return c;
}

void DevicePacer::destroy_events() {
  for (const auto& s : snapshot()) {
    std::lock_guard stream_lock(s->lock());
    s->retire();
  }
  {
    std::lock_guard lock(mu_);
    streams_.clear();
    epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  {
    std::lock_guard lock(shared_.spare_mu);
    for (EventHandle e : shared_.spare_events)
      shared_.backend.destroy_event(e);
    shared_.spare_events.clear();
  }
  shared_.timeline.destroy_events();
}

size_t DevicePacer::stream_count() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

}  // namespace egpu::pacing
