#include "share_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace egpu::harness {

namespace {

using BusyByKey = std::map<std::string, std::uint64_t>;

std::string key_of(const ContextUsage& context, GroupBy group_by) {
  return group_by == GroupBy::kPid ? std::to_string(context.pid) : context.label;
}

// Cumulative busy per key at every sample, carried forward when a key vanishes.
std::vector<BusyByKey> busy_series(const std::vector<UsageSample>& samples, int device,
                                   GroupBy group_by) {
  std::vector<BusyByKey> series;
  BusyByKey carried;
  for (const UsageSample& sample : samples) {
    BusyByKey now;
    for (const ContextUsage& context : sample.contexts) {
      if (context.device == device) now[key_of(context, group_by)] += context.busy_ns;
    }
    for (const auto& [key, busy] : now)
      carried[key] = std::max(carried[key], busy);
    series.push_back(carried);
  }
  return series;
}

Shares shares_between(const BusyByKey& from, const BusyByKey& to, std::uint64_t clock_ns) {
  Shares shares;
  for (const auto& [key, busy] : to) {
    const auto before = from.find(key);
    const std::uint64_t start = before == from.end() ? 0 : before->second;
    shares[key] =
        clock_ns == 0 ? 0.0 : static_cast<double>(busy - start) / static_cast<double>(clock_ns);
  }
  return shares;
}

}  // namespace

double ShareReport::share(const std::string& key) const {
  const auto found = whole_run.find(key);
  return found == whole_run.end() ? 0.0 : found->second;
}

double ShareReport::worst_window_deviation_pp(const std::string& key, double target) const {
  double worst = 0;
  for (const Shares& shares : windows) {
    const auto found = shares.find(key);
    const double share = found == shares.end() ? 0.0 : found->second;
    worst = std::max(worst, std::abs(share - target) * 100.0);
  }
  return worst;
}

ShareReport compute_shares(const std::vector<UsageSample>& samples, int device, GroupBy group_by,
                           std::chrono::milliseconds window) {
  ShareReport report;
  if (samples.size() < 2) return report;
  const std::vector<BusyByKey> busy = busy_series(samples, device, group_by);
  // Keys present in the first sample start from their value there.
  const std::uint64_t span = samples.back().clock_ns - samples.front().clock_ns;
  report.span_s = static_cast<double>(span) * 1e-9;
  report.whole_run = shares_between(busy.front(), busy.back(), span);

  const auto window_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(window).count());
  if (window_ns == 0) return report;
  std::size_t start = 0;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const std::uint64_t length = samples[i].clock_ns - samples[start].clock_ns;
    if (length < window_ns) continue;
    report.windows.push_back(shares_between(busy[start], busy[i], length));
    report.window_s.push_back(static_cast<double>(length) * 1e-9);
    start = i;
  }
  return report;
}

std::vector<UsageSample> samples_since(const std::vector<UsageSample>& samples,
                                       std::chrono::steady_clock::time_point from) {
  return samples_between(samples, from, std::chrono::steady_clock::time_point::max());
}

std::vector<UsageSample> samples_between(const std::vector<UsageSample>& samples,
                                         std::chrono::steady_clock::time_point from,
                                         std::chrono::steady_clock::time_point to) {
  std::vector<UsageSample> result;
  for (const UsageSample& sample : samples) {
    if (sample.taken_at >= from && sample.taken_at < to) result.push_back(sample);
  }
  return result;
}

std::string format_report(const ShareReport& report, const Shares& targets) {
  std::string text;
  char line[256];
  for (const auto& [key, share] : report.whole_run) {
    std::snprintf(line, sizeof line, "  %-20s %6.2f%% of %.2f s", key.c_str(), share * 100.0,
                  report.span_s);
    text += line;
    const auto target = targets.find(key);
    if (target != targets.end() && !report.windows.empty()) {
      std::snprintf(line, sizeof line, "  [target %.1f%%, worst of %zu windows %.1f pp]",
                    target->second * 100.0, report.windows.size(),
                    report.worst_window_deviation_pp(key, target->second));
      text += line;
    }
    text += "\n";
  }
  return text;
}

DeviceTimeSplit split_of_used_time(const ShareReport& report) {
  auto normalize = [](Shares shares) {
    double total = 0;
    for (const auto& [key, share] : shares)
      total += share;
    if (total > 0) {
      for (auto& [key, share] : shares)
        share /= total;
    }
    return shares;
  };
  DeviceTimeSplit out;
  out.split = report;
  for (const auto& [key, share] : report.whole_run)
    out.used += share;
  out.split.whole_run = normalize(report.whole_run);
  for (auto& w : out.split.windows)
    w = normalize(w);
  return out;
}

}  // namespace egpu::harness
