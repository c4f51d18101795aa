// Coverage: the union of device-time intervals already charged to a process on
// one GPU. Streams of a process overlap (or, on a time-sliced device, each
// stream's markers span the others' work): charging the union instead of the
// sum counts every nanosecond of device time once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace egpu::pacing {

class Coverage {
 public:
  explicit Coverage(size_t max_intervals = 128) : max_intervals_(max_intervals) {}

  // Adds [start, end) and returns how much of it was not covered before.
  int64_t add(int64_t start, int64_t end);
  void clear() { intervals_.clear(); }
  size_t interval_count() const { return intervals_.size(); }

 private:
  struct Interval {
    int64_t start;
    int64_t end;
  };
  size_t max_intervals_;
  std::vector<Interval> intervals_;  // sorted, disjoint, not adjacent
};

}  // namespace egpu::pacing
