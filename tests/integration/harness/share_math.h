// Device-time shares from a series of usage samples: each key's (pid's or
// label's) busy time over the device clock, for the whole series and for every
// window of a given length, and the worst deviation from a target.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "usage_sample.h"

namespace egpu::harness {

enum class GroupBy { kPid, kLabel };

using Shares = std::map<std::string, double>;  // key -> fraction of device time, 0..1

struct ShareReport {
  double span_s = 0;  // device clock covered by the whole-run shares
  Shares whole_run;
  std::vector<Shares> windows;   // consecutive windows of about the requested length
  std::vector<double> window_s;  // each window's actual length

  double share(const std::string& key) const;
  // Largest |window share - target| over all windows, in percentage points.
  double worst_window_deviation_pp(const std::string& key, double target) const;
};

// Shares on `device` between the first and the last sample. A key seen only
// later started at zero busy time; a key that vanishes keeps its last value.
ShareReport compute_shares(const std::vector<UsageSample>& samples, int device, GroupBy group_by,
                           std::chrono::milliseconds window);

// The samples taken at or after `from` (host time), and before `to`.
std::vector<UsageSample> samples_since(const std::vector<UsageSample>& samples,
                                       std::chrono::steady_clock::time_point from);
std::vector<UsageSample> samples_between(const std::vector<UsageSample>& samples,
                                         std::chrono::steady_clock::time_point from,
                                         std::chrono::steady_clock::time_point to);

// The same shares as fractions of the device time the keys used together
// (whole run and each window), for comparing splits when some device time
// went unused; `used` is that whole-run total as a fraction of the clock.
struct DeviceTimeSplit {
  ShareReport split;
  double used = 0;
};
DeviceTimeSplit split_of_used_time(const ShareReport& report);

// "greedy-a 50.1% [worst window 1.8 pp]" lines for logs.
std::string format_report(const ShareReport& report, const Shares& targets = {});

}  // namespace egpu::harness
