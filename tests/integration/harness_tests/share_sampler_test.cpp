#include "share_sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

namespace egpu::harness {
namespace {

using std::chrono::milliseconds;

// A source whose single context has run `calls` ms after `calls` readings, and
// that has nothing to read for its first `empty_calls` calls.
ShareSampler::Source counting_source(std::shared_ptr<std::atomic<int>> calls, int empty_calls) {
  return [calls, empty_calls]() -> std::optional<UsageSample> {
    const int n = ++*calls;
    if (n <= empty_calls) return std::nullopt;
    UsageSample sample;
    sample.taken_at = std::chrono::steady_clock::now();
    sample.clock_ns = static_cast<std::uint64_t>(n) * 2000000;
    sample.contexts.push_back({42, 0, "worker", static_cast<std::uint64_t>(n) * 1000000, true});
    return sample;
  };
}

TEST(ShareSampler, CollectsReadingsInTheBackgroundUntilStopped) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  ShareSampler sampler(counting_source(calls, 3), milliseconds(5));
  ASSERT_TRUE(sampler.wait_until([](const UsageSample& s) { return s.contexts.size() == 1; },
                                 milliseconds(5000)));
  ASSERT_TRUE(sampler.wait_until([](const UsageSample& s) { return s.clock_ns >= 10 * 2000000ULL; },
                                 milliseconds(5000)));
  sampler.stop();
  const auto samples = sampler.samples();
  // The three empty readings were skipped; the rest are in order.
  ASSERT_GE(samples.size(), 7u);
  EXPECT_EQ(samples.front().clock_ns, 4 * 2000000ULL);
  for (std::size_t i = 1; i < samples.size(); ++i) {
    EXPECT_GT(samples[i].clock_ns, samples[i - 1].clock_ns);
  }
  // Stopped: no more readings.
  const int after_stop = calls->load();
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(calls->load(), after_stop);
  EXPECT_EQ(sampler.samples().size(), samples.size());
}

TEST(ShareSampler, WaitUntilTimesOut) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  ShareSampler sampler(counting_source(calls, 1000000), milliseconds(5));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(sampler.wait_until([](const UsageSample&) { return true; }, milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(50));
  EXPECT_FALSE(sampler.latest().has_value());
}

TEST(ShareSampler, SampleForTakesOneReadingPerInterval) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  const auto samples = sample_for(counting_source(calls, 0), milliseconds(10), milliseconds(100));
  EXPECT_EQ(samples.size(), 11u);  // at 0, 10, ..., 100 ms
  EXPECT_EQ(calls->load(), 11);
}

TEST(ShareSampler, LabelsBusyNeedsEveryLabelWithDeviceTime) {
  UsageSample sample;
  sample.contexts = {{1, 0, "a", 5, true}, {2, 0, "b", 0, true}};
  EXPECT_TRUE(labels_busy({"a"})(sample));
  EXPECT_FALSE(labels_busy({"a", "b"})(sample));
  EXPECT_FALSE(labels_busy({"c"})(sample));
  EXPECT_TRUE(labels_busy({})(sample));
}

}  // namespace
}  // namespace egpu::harness
