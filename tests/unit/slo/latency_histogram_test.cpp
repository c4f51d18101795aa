#include "core/slo/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace egpu::slo {
namespace {

TEST(LatencyHistogram, BucketsAreContiguousAndAtMostAnEighthWide) {
  int64_t previous_upper = -1;
  for (std::size_t b = 0; b + 1 < kLatencyBuckets; ++b) {
    const int64_t upper = bucket_upper_ns(b);
    ASSERT_GT(upper, previous_upper);
    // The first value past the previous bucket lands here, and so does the upper edge.
    EXPECT_EQ(latency_bucket(previous_upper + 1), b) << b;
    EXPECT_EQ(latency_bucket(upper), b) << b;
    const double lower_us = static_cast<double>(previous_upper + 1) / 1000.0;
    if (lower_us >= 8) {
      EXPECT_LE((static_cast<double>(upper + 1) / 1000.0 - lower_us) / lower_us, 0.125 + 1e-9) << b;
    }
    previous_upper = upper;
  }
  EXPECT_EQ(latency_bucket(-5), 0u);
  EXPECT_EQ(latency_bucket(INT64_MAX), kLatencyBuckets - 1);
}

TEST(LatencyHistogram, QuantileIsNeverBelowTheTrueOneAndWithinABucket) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency_ms(3.0, 0.8);
  LatencyHistogram h;
  std::vector<int64_t> samples;
  for (int i = 0; i < 20000; ++i) {
    const auto ns = static_cast<int64_t>(latency_ms(rng) * 1e6);
    samples.push_back(ns);
    h.record(ns);
  }
  std::sort(samples.begin(), samples.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const int64_t truth = samples[static_cast<std::size_t>(std::ceil(q * samples.size())) - 1];
    const int64_t read = h.quantile_ns(q);
    EXPECT_GE(read, truth) << q;
    EXPECT_LE(static_cast<double>(read), static_cast<double>(truth) * 1.126) << q;
  }
  EXPECT_EQ(h.samples(), 20000u);
  EXPECT_EQ(LatencyHistogram{}.quantile_ns(0.99), 0);
}

TEST(LatencyHistogram, DeltaOfCumulativeCountsTakesAResetAsAllNew) {
  LatencyHistogram before, now;
  before.record(5'000'000, 10);
  now.record(5'000'000, 14);
  now.record(9'000'000, 3);
  LatencyHistogram d = LatencyHistogram::delta(now.counts(), before.counts());
  EXPECT_EQ(d.samples(), 7u);
  EXPECT_EQ(d.counts()[latency_bucket(5'000'000)], 4u);
  // The writer restarted: its counter went down, and what it holds is new.
  d = LatencyHistogram::delta(before.counts(), now.counts());
  EXPECT_EQ(d.samples(), 10u);
}

TEST(LatencyHistogram, HostileCountsSaturateInsteadOfWrapping) {
  LatencyHistogram::Counts huge{};
  huge[3] = UINT64_MAX;
  huge[200] = UINT64_MAX;
  LatencyHistogram h = LatencyHistogram::delta(huge, LatencyHistogram::Counts{});
  EXPECT_EQ(h.samples(), UINT64_MAX);
  EXPECT_EQ(h.quantile_ns(0.5), bucket_upper_ns(3));
  h.add(h);
  EXPECT_EQ(h.samples(), UINT64_MAX);
}

}  // namespace
}  // namespace egpu::slo
