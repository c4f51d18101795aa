// LatencyHistogram: latency samples in log-linear buckets (8 per power of two
// of microseconds, so a bucket is at most 12.5% wide), the form in which a
// shim reports them and the agent reads them: fixed size, no allocation, and
// counts that add, so windows merge by addition.
//
// Percentiles are read as the upper edge of the bucket they fall in: an
// objective is judged by a value never below the true one (at most 12.5% above).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace egpu::slo {

inline constexpr int kSubBucketBits = 3;             // 8 buckets per power of two
inline constexpr std::size_t kLatencyBuckets = 240;  // up to 2^32 us (71 min)

// The bucket of a latency; negative latencies count as 0, too long ones go to
// the last bucket.
std::size_t latency_bucket(int64_t ns);
// The largest latency (ns) the bucket holds.
int64_t bucket_upper_ns(std::size_t bucket);

class LatencyHistogram {
 public:
  using Counts = std::array<uint64_t, kLatencyBuckets>;

  void record(int64_t ns, uint64_t count = 1);
  void add(const LatencyHistogram& other);
  // What `now` counted since `before`, from two reads of cumulative counters
  // another process writes (a hostile one, perhaps): a bucket that went down
  // was reset (its writer restarted), so all of it is new.
  static LatencyHistogram delta(const Counts& now, const Counts& before);

  uint64_t samples() const { return samples_; }
  // The upper edge of the bucket holding the q-quantile (q in (0, 1]); 0
  // without samples.
  int64_t quantile_ns(double q) const;
  const Counts& counts() const { return counts_; }
  void clear();
  bool operator==(const LatencyHistogram&) const = default;

 private:
  Counts counts_{};
  uint64_t samples_ = 0;
};

}  // namespace egpu::slo
