#include "core/slo/latency_model.h"

#include <algorithm>
#include <cmath>

namespace egpu::slo {
namespace {

std::size_t nearest_point(double h) {
  const auto& grid = LatencyModel::kHeadrooms;
  std::size_t best = 0;
  for (std::size_t i = 1; i < grid.size(); ++i) {
    // Nearest on a log scale: the grid is roughly geometric.
    if (std::abs(std::log(h / grid[i])) < std::abs(std::log(h / grid[best]))) best = i;
  }
  return best;
}

}  // namespace

double LatencyModel::Point::latency_ns() const {
  return static_cast<double>(*std::max_element(recent.begin(), recent.begin() + count));
}

void LatencyModel::observe(double h, int64_t latency_ns) {
  if (!(h > 0.0)) return;
  observe_at(nearest_point(h), latency_ns);
}

void LatencyModel::observe_at(std::size_t point, int64_t latency_ns) {
  if (latency_ns <= 0) return;
  // The ring forgets: a drifting service is followed within kRecent windows.
  Point& p = points_[point];
  p.recent[p.next] = latency_ns;
  p.next = (p.next + 1) % kRecent;
  p.count = std::min<uint32_t>(p.count + 1, kRecent);
}

std::size_t LatencyModel::fitted(std::array<double, kHeadrooms.size()>& h,
                                 std::array<double, kHeadrooms.size()>& latency) const {
  std::array<double, kHeadrooms.size()> weight{};
  std::array<std::size_t, kHeadrooms.size()> first{};  // first grid point of each block
  std::size_t n = 0;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    if (points_[i].count == 0) continue;
    latency[n] = points_[i].latency_ns();
    weight[n] = points_[i].count;
    first[n] = i;
    ++n;
    // Pool adjacent violators: a block slower than the one before it (at less
    // headroom) merges with it into their weighted average.
    while (n >= 2 && latency[n - 1] > latency[n - 2]) {
      const double w = weight[n - 2] + weight[n - 1];
      latency[n - 2] = (latency[n - 2] * weight[n - 2] + latency[n - 1] * weight[n - 1]) / w;
      weight[n - 2] = w;
      --n;
    }
  }
  // Each block stands at the mean headroom of its grid points with data.
  for (std::size_t b = 0; b < n; ++b) {
    const std::size_t end = b + 1 < n ? first[b + 1] : points_.size();
    double sum = 0, count = 0;
    for (std::size_t i = first[b]; i < end; ++i) {
      if (points_[i].count == 0) continue;
      sum += kHeadrooms[i];
      count += 1;
    }
    h[b] = sum / count;
  }
  return n;
}

std::optional<double> LatencyModel::predict(double at) const {
  std::array<double, kHeadrooms.size()> h{}, latency{};
  const std::size_t n = fitted(h, latency);
  if (n == 0 || !(at > 0.0)) return std::nullopt;
  // Below the least observed headroom the work queues: latency grows as the
  // headroom shrinks (no faster than 1/h, an optimistic bound the next
  // window corrects). Above the largest it stays: a service's own time is a
  // floor more share does not lower.
  if (at <= h[0]) return latency[0] * h[0] / at;
  if (at >= h[n - 1]) return latency[n - 1];
  std::size_t i = 1;
  while (h[i] < at)
    ++i;
  const double t = (at - h[i - 1]) / (h[i] - h[i - 1]);
  return latency[i - 1] + t * (latency[i] - latency[i - 1]);
}

std::optional<double> LatencyModel::headroom_for(int64_t target_ns) const {
  if (points() == 0) return std::nullopt;
  const double top = kHeadrooms.back();
  for (int step = 0;; ++step) {
    const double h = (20 + step) / 20.0;  // from 1.0 upwards, in steps of 0.05
    if (h > top + 1e-9) return std::nullopt;
    if (*predict(h) <= static_cast<double>(target_ns) * (1 + 1e-12)) return h;
  }
}

std::size_t LatencyModel::points() const {
  return static_cast<std::size_t>(
      std::count_if(points_.begin(), points_.end(), [](const Point& p) { return p.count > 0; }));
}

void LatencyModel::clear() {
  points_ = {};
}

LatencyModel::Windows LatencyModel::windows() const {
  Windows out;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const Point& p = points_[i];
    // The ring's oldest entry is at `next` once it is full, at 0 before.
    const uint32_t first = p.count == kRecent ? p.next : 0;
    for (uint32_t k = 0; k < p.count; ++k)
      out[i].push_back(p.recent[(first + k) % kRecent]);
  }
  return out;
}

LatencyModel LatencyModel::from_windows(const Windows& windows) {
  LatencyModel model;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    for (int64_t latency_ns : windows[i])
      model.observe_at(i, latency_ns);
  }
  return model;
}

}  // namespace egpu::slo
