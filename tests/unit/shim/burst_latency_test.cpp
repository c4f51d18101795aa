#include "shim/burst_latency.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace egpu::shim {
namespace {

TEST(BurstLatency, ABurstRunsFromTheFirstLaunchAfterIdleToTheSyncThatFindsItDone) {
  BurstLatency burst;
  EXPECT_FALSE(burst.ended(1'000, 0).has_value());  // nothing launched: no burst
  int reads = 0;
  auto throttled = [&reads](uint64_t value) {
    return [&reads, value] {
      ++reads;
      return value;
    };
  };
  burst.launched(10'000, throttled(500));
  burst.launched(12'000, throttled(900));  // inside the burst: its start stays
  burst.launched(15'000, throttled(950));
  EXPECT_EQ(reads, 1);  // the gate's counter is read only when a burst opens
  const auto ended = burst.ended(40'000, 4'500);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->span_ns, 30'000);
  EXPECT_EQ(ended->gate_ns, 4'000);
  EXPECT_FALSE(burst.ended(41'000, 4'500).has_value());  // closed once
  burst.launched(50'000, throttled(4'500));
  EXPECT_EQ(burst.ended(51'000, 4'500)->span_ns, 1'000);
}

TEST(BurstLatency, ImpossibleReadingsGiveNoBurstOrABoundedOne) {
  BurstLatency burst;
  burst.launched(10'000, [] { return uint64_t{100}; });
  EXPECT_FALSE(burst.ended(9'000, 100).has_value());  // a clock that went back
  burst.launched(10'000, [] { return uint64_t{100}; });
  const auto ended = burst.ended(11'000, 50);  // a counter that went back
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->gate_ns, 0);
  burst.launched(10'000, [] { return uint64_t{0}; });
  EXPECT_EQ(burst.ended(11'000, 1'000'000)->gate_ns, 1'000);  // never more than the span
}

TEST(BurstLatency, ThreadsRacingToOpenABurstLeaveOneStart) {
  BurstLatency burst;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&burst, t] {
      for (int i = 0; i < 1000; ++i)
        burst.launched(1'000 + t, [] { return uint64_t{0}; });
    });
  }
  for (auto& th : threads)
    th.join();
  const auto ended = burst.ended(2'000, 0);
  ASSERT_TRUE(ended.has_value());
  EXPECT_GE(ended->span_ns, 997);
  EXPECT_LE(ended->span_ns, 1'000);
}

}  // namespace
}  // namespace egpu::shim
