#include "core/faa/gang_window.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace egpu::faa {

Status validate(const GangWindow& w) {
  if (w.period <= 0) return Error{"gang window: period must be positive"};
  if (w.length <= 0 || w.length > w.period) {
    return Error{"gang window: length must be in (0, period]"};
  }
  if (w.offset < 0 || w.offset > w.period - w.length) {
    return Error{"gang window: offset must be in [0, period - length]"};
  }
  return {};
}

WindowPhase window_at(const GangWindow& w, Nanos now) {
  // The start of the window of the period `now` falls in (floor division:
  // now may precede the epoch).
  const Nanos rel = now - w.epoch - w.offset;
  Nanos k = rel / w.period;
  if (rel % w.period < 0) --k;
  const Nanos start = w.epoch + w.offset + k * w.period;
  if (now < start + w.length) return {true, start, start + w.length};
  return {false, start + w.period, start + w.period + w.length};
}

Nanos window_length(double share, Nanos period) {
  const double s = std::clamp(share, 0.0, 1.0);
  return std::max<Nanos>(1, std::llround(s * static_cast<double>(period)));
}

std::vector<std::optional<Nanos>> place_gangs(const std::vector<GangRequest>& gangs, Nanos period) {
  std::vector<std::optional<Nanos>> out(gangs.size());
  // Windows placed so far on each GPU: [start, end) within the period.
  std::map<uint32_t, std::vector<std::pair<Nanos, Nanos>>> busy;
  const auto clear = [&](const GangRequest& req, Nanos o) {
    if (o < 0 || o + req.length > period) return false;
    return std::all_of(req.gpus.begin(), req.gpus.end(), [&](uint32_t gpu) {
      return std::none_of(busy[gpu].begin(), busy[gpu].end(),
                          [&](const auto& w) { return o < w.second && w.first < o + req.length; });
    });
  };
  const auto place = [&](std::size_t g, Nanos o) {
    out[g] = o;
    for (uint32_t gpu : gangs[g].gpus)
      busy[gpu].emplace_back(o, o + gangs[g].length);
  };
  const auto valid = [&](const GangRequest& req) {
    return req.length > 0 && req.length <= period && !req.gpus.empty();
  };
  for (std::size_t g = 0; g < gangs.size(); ++g) {
    if (valid(gangs[g]) && gangs[g].keep && clear(gangs[g], *gangs[g].keep))
      place(g, *gangs[g].keep);
  }
  for (std::size_t g = 0; g < gangs.size(); ++g) {
    const GangRequest& req = gangs[g];
    if (out[g] || !valid(req)) continue;
    // First fit: the earliest offset is 0 or the end of a window already
    // placed on one of its GPUs.
    std::vector<Nanos> candidates{0};
    for (uint32_t gpu : req.gpus)
      for (const auto& [s, e] : busy[gpu])
        candidates.push_back(e);
    std::sort(candidates.begin(), candidates.end());
    for (Nanos o : candidates) {
      if (o + req.length > period) break;
      if (!clear(req, o)) continue;
      place(g, o);
      break;
    }
  }
  return out;
}

Status can_align_across_nodes(const ClockQuality& clock, Nanos tolerance) {
  if (!clock.synchronized) {
    return Error{"the clock is not synchronized (no chrony, ntpd or PTP discipline)"};
  }
  if (clock.error_bound > tolerance) {
    return Error{"the clock's estimated error " + std::to_string(clock.error_bound / 1000) +
                 " us exceeds the alignment tolerance " + std::to_string(tolerance / 1000) + " us"};
  }
  return {};
}

}  // namespace egpu::faa
