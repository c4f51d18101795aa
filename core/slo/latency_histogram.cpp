#include "core/slo/latency_histogram.h"

#include <bit>
#include <cmath>
#include <limits>

namespace egpu::slo {
namespace {

constexpr uint64_t kSub = uint64_t{1} << kSubBucketBits;

// Saturating: a hostile writer's counts must not wrap a total to a small number.
uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

}  // namespace

std::size_t latency_bucket(int64_t ns) {
  const uint64_t us = ns <= 0 ? 0 : static_cast<uint64_t>(ns) / 1000;
  if (us < kSub) return static_cast<std::size_t>(us);
  const int exponent = std::bit_width(us) - 1;  // >= kSubBucketBits
  const uint64_t sub = (us >> (exponent - kSubBucketBits)) & (kSub - 1);
  const std::size_t bucket = static_cast<std::size_t>(exponent - kSubBucketBits + 1) * kSub + sub;
  return bucket < kLatencyBuckets ? bucket : kLatencyBuckets - 1;
}

int64_t bucket_upper_ns(std::size_t bucket) {
  if (bucket >= kLatencyBuckets) bucket = kLatencyBuckets - 1;
  if (bucket < kSub) return static_cast<int64_t>(bucket) * 1000 + 999;
  const int exponent = static_cast<int>(bucket / kSub) - 1 + kSubBucketBits;
  const uint64_t sub = bucket % kSub;
  const uint64_t width = uint64_t{1} << (exponent - kSubBucketBits);
  const uint64_t last_us = ((kSub + sub) << (exponent - kSubBucketBits)) + width - 1;
  return static_cast<int64_t>(last_us) * 1000 + 999;
}

void LatencyHistogram::record(int64_t ns, uint64_t count) {
  counts_[latency_bucket(ns)] = add_sat(counts_[latency_bucket(ns)], count);
  samples_ = add_sat(samples_, count);
}

void LatencyHistogram::add(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kLatencyBuckets; ++i)
    counts_[i] = add_sat(counts_[i], other.counts_[i]);
  samples_ = add_sat(samples_, other.samples_);
}

LatencyHistogram LatencyHistogram::delta(const Counts& now, const Counts& before) {
  LatencyHistogram h;
  for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
    const uint64_t d = now[i] >= before[i] ? now[i] - before[i] : now[i];
    h.counts_[i] = d;
    h.samples_ = add_sat(h.samples_, d);
  }
  return h;
}

int64_t LatencyHistogram::quantile_ns(double q) const {
  if (samples_ == 0) return 0;
  if (!(q > 0.0)) q = std::numeric_limits<double>::min();
  if (q > 1.0) q = 1.0;
  // The rank of the q-quantile among the samples, 1-based: ceil(q * n).
  const double rank_d = std::ceil(q * static_cast<double>(samples_));
  constexpr double kTop = 18446744073709551615.0;  // UINT64_MAX, rounded up to 2^64
  const uint64_t rank = rank_d < 1.0     ? 1
                        : rank_d >= kTop ? std::numeric_limits<uint64_t>::max()
                                         : static_cast<uint64_t>(rank_d);
  uint64_t seen = 0;
  for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
    seen = add_sat(seen, counts_[i]);
    if (seen >= rank) return bucket_upper_ns(i);
  }
  return bucket_upper_ns(kLatencyBuckets - 1);
}

void LatencyHistogram::clear() {
  counts_.fill(0);
  samples_ = 0;
}

}  // namespace egpu::slo
