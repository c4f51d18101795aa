#include "share_math.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace egpu::harness {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kMs = 1000000;

// A reading at device time `ms`, with (pid, device, label, busy ms) contexts.
UsageSample at(std::uint64_t ms, std::vector<ContextUsage> contexts) {
  UsageSample sample;
  sample.taken_at = std::chrono::steady_clock::time_point(milliseconds(ms));
  sample.clock_ns = ms * kMs;
  sample.contexts = std::move(contexts);
  return sample;
}

ContextUsage context(pid_t pid, int device, const char* label, std::uint64_t busy_ms) {
  return {pid, device, label, busy_ms * kMs};
}

TEST(ShareMath, WholeRunSharesAreBusyOverClockFromTheFirstSample) {
  // a runs 75% of the time, b 25%, measured from t=100 ms (both already busy).
  std::vector<UsageSample> samples;
  for (std::uint64_t t = 100; t <= 1100; t += 100) {
    samples.push_back(at(t, {context(1, 0, "a", t * 3 / 4), context(2, 0, "b", t / 4)}));
  }
  const ShareReport report = compute_shares(samples, 0, GroupBy::kLabel, milliseconds(500));
  EXPECT_DOUBLE_EQ(report.span_s, 1.0);
  EXPECT_NEAR(report.share("a"), 0.75, 1e-9);
  EXPECT_NEAR(report.share("b"), 0.25, 1e-9);
  EXPECT_EQ(report.share("missing"), 0.0);
  ASSERT_EQ(report.windows.size(), 2u);
  EXPECT_NEAR(report.worst_window_deviation_pp("a", 0.75), 0.0, 1e-9);
  EXPECT_NEAR(report.worst_window_deviation_pp("a", 0.70), 5.0, 1e-9);
}

TEST(ShareMath, WindowsFindTheWorstDeviation) {
  // a: 100% for the first 500 ms, then 0%.
  std::vector<UsageSample> samples;
  for (std::uint64_t t = 0; t <= 1000; t += 100) {
    samples.push_back(at(t, {context(1, 0, "a", std::min<std::uint64_t>(t, 500))}));
  }
  const ShareReport report = compute_shares(samples, 0, GroupBy::kLabel, milliseconds(500));
  EXPECT_NEAR(report.share("a"), 0.5, 1e-9);
  ASSERT_EQ(report.windows.size(), 2u);
  EXPECT_NEAR(report.windows[0].at("a"), 1.0, 1e-9);
  EXPECT_NEAR(report.windows[1].at("a"), 0.0, 1e-9);
  EXPECT_NEAR(report.worst_window_deviation_pp("a", 0.5), 50.0, 1e-9);
}

TEST(ShareMath, GroupsByPidOrLabelAndFiltersTheDevice) {
  // Two processes with one label on device 0, another on device 1.
  std::vector<UsageSample> samples = {
      at(0, {context(10, 0, "job", 0), context(11, 0, "job", 0), context(12, 1, "other", 0)}),
      at(1000,
         {context(10, 0, "job", 300), context(11, 0, "job", 200), context(12, 1, "other", 900)}),
  };
  const ShareReport by_label = compute_shares(samples, 0, GroupBy::kLabel, milliseconds(0));
  EXPECT_NEAR(by_label.share("job"), 0.5, 1e-9);
  EXPECT_EQ(by_label.whole_run.count("other"), 0u);
  const ShareReport by_pid = compute_shares(samples, 0, GroupBy::kPid, milliseconds(0));
  EXPECT_NEAR(by_pid.share("10"), 0.3, 1e-9);
  EXPECT_NEAR(by_pid.share("11"), 0.2, 1e-9);
  const ShareReport device1 = compute_shares(samples, 1, GroupBy::kLabel, milliseconds(0));
  EXPECT_NEAR(device1.share("other"), 0.9, 1e-9);
}

TEST(ShareMath, LateKeysStartAtZeroAndVanishedKeysKeepTheirTime) {
  std::vector<UsageSample> samples = {
      at(0, {context(1, 0, "early", 0)}),
      at(500, {context(1, 0, "early", 400), context(2, 0, "late", 50)}),
      at(1000, {context(2, 0, "late", 450)}),  // "early" died
  };
  const ShareReport report = compute_shares(samples, 0, GroupBy::kLabel, milliseconds(0));
  EXPECT_NEAR(report.share("early"), 0.4, 1e-9);
  EXPECT_NEAR(report.share("late"), 0.45, 1e-9);
}

TEST(ShareMath, SamplesSinceCutsByHostTime) {
  std::vector<UsageSample> samples = {at(0, {}), at(100, {}), at(200, {})};
  const auto cut = samples_since(samples, std::chrono::steady_clock::time_point(milliseconds(100)));
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut.front().clock_ns, 100 * kMs);
}

TEST(ShareMath, TooFewSamplesGiveAnEmptyReport) {
  const ShareReport report =
      compute_shares({at(0, {context(1, 0, "a", 0)})}, 0, GroupBy::kLabel, milliseconds(500));
  EXPECT_TRUE(report.whole_run.empty());
  EXPECT_TRUE(report.windows.empty());
}

}  // namespace
}  // namespace egpu::harness
