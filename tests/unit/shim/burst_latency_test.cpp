#include "shim/burst_latency.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace egpu::shim {
namespace {

TEST(BurstLatency, ABurstRunsFromTheFirstLaunchAfterIdleToTheSyncThatFindsItDone) {
  BurstLatency burst;
  EXPECT_FALSE(burst.ended(1'000, 0).has_value());  // nothing launched: no burst
  ASSERT_TRUE(burst.opening());
  burst.launched(10'000, 500);
  EXPECT_FALSE(burst.opening());
  burst.launched(12'000, 900);  // inside the burst: its start stays
  const auto ended = burst.ended(40'000, 4'500);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->span_ns, 30'000);
  EXPECT_EQ(ended->gate_ns, 4'000);  // gate time since before the first launch was admitted
  EXPECT_FALSE(burst.ended(41'000, 4'500).has_value());  // closed once
  EXPECT_TRUE(burst.opening());
  burst.launched(50'000, 4'500);
  EXPECT_EQ(burst.ended(51'000, 4'500)->span_ns, 1'000);
}

TEST(BurstLatency, ImpossibleReadingsGiveNoBurstOrABoundedOne) {
  BurstLatency burst;
  burst.launched(10'000, 100);
  EXPECT_FALSE(burst.ended(9'000, 100).has_value());  // a clock that went back
  burst.launched(10'000, 100);
  const auto ended = burst.ended(11'000, 50);  // a counter that went back (a new attachment)
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->gate_ns, 0);
  burst.launched(10'000, 0);
  EXPECT_EQ(burst.ended(11'000, 1'000'000)->gate_ns, 1'000);  // never more than the span
}

// Threads racing to open a burst: one wins, and the burst has its start and
// its gate time, never one thread's start with another's gate time.
TEST(BurstLatency, OfThreadsRacingToOpenABurstOneWinsWithItsOwnReadings) {
  for (int round = 0; round < 200; ++round) {
    BurstLatency burst;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&burst, t] {
        // Thread t's launch arrived at 1000 + t with 100 * t of gate time before it.
        burst.launched(1'000 + t, static_cast<uint64_t>(100 * t));
      });
    }
    for (auto& th : threads)
      th.join();
    const auto ended = burst.ended(2'000, 1'000);
    ASSERT_TRUE(ended.has_value());
    const int64_t winner = 1'000 - ended->span_ns;  // its start was 1000 + winner
    ASSERT_GE(winner, 0);
    ASSERT_LE(winner, 3);
    EXPECT_EQ(ended->gate_ns, 1'000 - 100 * winner) << "round " << round;
  }
}

}  // namespace
}  // namespace egpu::shim
