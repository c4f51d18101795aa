#include "core/pacing/coverage.h"

#include <algorithm>

namespace egpu::pacing {

int64_t Coverage::add(int64_t start, int64_t end) {
  if (end <= start) return 0;
  // First interval that ends at or after `start`: everything before it is
  // entirely left of [start, end) and neither overlaps nor touches it.
  auto first = std::lower_bound(intervals_.begin(), intervals_.end(), start,
                                [](const Interval& iv, int64_t s) { return iv.end < s; });
  int64_t covered = 0;
  int64_t merged_start = start;
  int64_t merged_end = end;
  auto last = first;
  for (; last != intervals_.end() && last->start <= end; ++last) {
    covered += std::max<int64_t>(0, std::min(end, last->end) - std::max(start, last->start));
    merged_start = std::min(merged_start, last->start);
    merged_end = std::max(merged_end, last->end);
  }
  const auto pos = intervals_.erase(first, last);
  intervals_.insert(pos, Interval{merged_start, merged_end});
  // Old history is forgotten first: a segment that far back no longer arrives.
  if (intervals_.size() > max_intervals_) {
    intervals_.erase(intervals_.begin(),
                     intervals_.begin() + static_cast<long>(intervals_.size() - max_intervals_));
  }
  return (end - start) - covered;
}

}  // namespace egpu::pacing
