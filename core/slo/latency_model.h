// LatencyModel: what share a latency-critical instance needs for a latency,
// learnt online from its own windows (Mudi's piecewise-linear latency/share
// curve, EuroSys'25).
//
// The curve is kept against headroom, h = share / demand (demand: the device
// time per second the instance used while it kept up), not against the share
// itself: latency is a function of how far the share exceeds the work, so a
// load that rises or falls with the tides moves the share it needs with it,
// without learning the curve again. Points sit on a fixed grid of headrooms,
// each the worst of the last kRecent windows observed near it: an objective
// must hold in nearly every window, so the curve is of a window's bad case,
// not its average, and a share sized by it is not undone by the next tail.
// The curve through them is made non-increasing (more share never predicted
// slower) and read by linear interpolation. Pure and deterministic.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace egpu::slo {

class LatencyModel {
 public:
  // The grid of headrooms the curve is kept at.
  static constexpr std::array<double, 12> kHeadrooms = {1.0, 1.25, 1.5, 2.0, 2.5,  3.0,
                                                        4.0, 5.0,  6.0, 8.0, 12.0, 16.0};

  // A window's latency (ns) at headroom `h`; ignored for h <= 0 or latency <= 0.
  void observe(double h, int64_t latency_ns);
  // The predicted latency at headroom `h`; nullopt before any observation.
  std::optional<double> predict(double h) const;
  // The least headroom (to 0.05) predicted to keep latency <= target_ns;
  // nullopt before any observation, or when no headroom up to the grid's last
  // is predicted to: the caller then probes upwards.
  std::optional<double> headroom_for(int64_t target_ns) const;
  // Observed grid points (for status): count of points with data.
  std::size_t points() const;
  void clear();

  // What the model remembers, so a restarted agent keeps it: for each grid
  // point, its windows' latencies, oldest first. from_windows() takes the
  // same back, keeping the newest kRecent of a point and ignoring latencies
  // <= 0 (as observe() does), so any input gives a valid model.
  using Windows = std::array<std::vector<int64_t>, kHeadrooms.size()>;
  Windows windows() const;
  static LatencyModel from_windows(const Windows& windows);
  bool operator==(const LatencyModel& other) const { return windows() == other.windows(); }

 private:
  static constexpr std::size_t kRecent = 16;
  struct Point {
    std::array<int64_t, kRecent> recent{};  // the last windows seen here (a ring)
    uint32_t count = 0;                     // windows seen here, up to kRecent
    uint32_t next = 0;                      // where the next one goes
    double latency_ns() const;              // the worst of them
  };
  // The curve: grid points with data, made non-increasing (pool adjacent
  // violators, weighted).
  void observe_at(std::size_t point, int64_t latency_ns);
  std::size_t fitted(std::array<double, kHeadrooms.size()>& h,
                     std::array<double, kHeadrooms.size()>& latency) const;

  std::array<Point, kHeadrooms.size()> points_{};
};

}  // namespace egpu::slo
