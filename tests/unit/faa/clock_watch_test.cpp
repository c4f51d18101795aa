// ClockWatch: a multi-node step's windows follow the clock as it is now, and
// an error hovering at the tolerance does not move them at every reading.
#include "core/faa/clock_watch.h"

#include <gtest/gtest.h>

namespace egpu::faa {
namespace {

constexpr Nanos kUs = kMicrosecond;
constexpr Nanos kMs = kMillisecond;
const ClockQuality kGood{true, 100 * kUs};
const ClockQuality kUnsynced{false, 100 * kUs};

ClockWatch watch(int regain = 5) {
  return ClockWatch(ClockWatch::Settings{500 * kUs, regain});
}

TEST(ClockWatch, TheFirstReadingDecidesAtOnce) {
  ClockWatch good = watch();
  EXPECT_FALSE(good.aligned());
  EXPECT_EQ(good.observe(kGood), ClockWatch::Change::kNone);
  EXPECT_TRUE(good.aligned());
  EXPECT_TRUE(good.reason().empty());

  ClockWatch bad = watch();
  EXPECT_EQ(bad.observe(kUnsynced), ClockWatch::Change::kNone);
  EXPECT_FALSE(bad.aligned());
  EXPECT_NE(bad.reason().find("not synchronized"), std::string::npos) << bad.reason();
}

TEST(ClockWatch, ABadReadingEndsAlignmentAtOnce) {
  ClockWatch w = watch();
  w.observe(kGood);
  EXPECT_EQ(w.observe(kGood), ClockWatch::Change::kNone);
  EXPECT_EQ(w.observe({true, 2 * kMs}), ClockWatch::Change::kLost);
  EXPECT_FALSE(w.aligned());
  EXPECT_NE(w.reason().find("2000 us exceeds"), std::string::npos) << w.reason();
  ClockWatch u = watch();
  u.observe(kGood);
  EXPECT_EQ(u.observe(kUnsynced), ClockWatch::Change::kLost);
  EXPECT_NE(u.reason().find("not synchronized"), std::string::npos) << u.reason();
}

TEST(ClockWatch, AlignmentComesBackAfterGoodReadingsInARow) {
  ClockWatch w = watch(5);
  w.observe(kGood);
  ASSERT_EQ(w.observe(kUnsynced), ClockWatch::Change::kLost);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(w.observe(kGood), ClockWatch::Change::kNone) << i;
    EXPECT_FALSE(w.aligned());
    EXPECT_NE(w.reason().find(std::to_string(i) + " of 5"), std::string::npos) << w.reason();
  }
  EXPECT_EQ(w.observe(kGood), ClockWatch::Change::kRegained);
  EXPECT_TRUE(w.aligned());
  EXPECT_TRUE(w.reason().empty());
}

TEST(ClockWatch, ABadReadingWhileRegainingStartsTheCountAgain) {
  ClockWatch w = watch(3);
  w.observe(kUnsynced);
  w.observe(kGood);
  w.observe(kGood);
  w.observe({true, 600 * kUs});  // over the tolerance
  w.observe(kGood);
  w.observe(kGood);
  EXPECT_FALSE(w.aligned());
  EXPECT_EQ(w.observe(kGood), ClockWatch::Change::kRegained);
}

// An error that hovers around the tolerance (450-550 us against 500) moves
// the windows once, not at every crossing: inside the tolerance but above
// 3/4 of it does not count towards regaining.
TEST(ClockWatch, AnErrorHoveringAtTheToleranceDoesNotFlap) {
  ClockWatch w = watch(5);
  w.observe(kGood);
  int changes = 0;
  for (int i = 0; i < 1000; ++i) {
    const Nanos error = (i % 2 == 0 ? 450 : 550) * kUs;
    if (w.observe({true, error}) != ClockWatch::Change::kNone) ++changes;
  }
  EXPECT_EQ(changes, 1);
  EXPECT_FALSE(w.aligned());
  w.observe({true, 450 * kUs});
  EXPECT_NE(w.reason().find("not yet under 375 us"), std::string::npos) << w.reason();
  // The margin: 375 us counts.
  for (int i = 0; i < 5; ++i)
    w.observe({true, 375 * kUs});
  EXPECT_TRUE(w.aligned());
}

TEST(ClockWatch, AnEpochMovesOnlyByItsDistanceWithinThePeriod) {
  const Nanos p = 20 * kMs;
  EXPECT_FALSE(epoch_moved(5 * kMs, 5 * kMs + 10 * kUs, p, 50 * kUs));
  EXPECT_TRUE(epoch_moved(5 * kMs, 5 * kMs + 100 * kUs, p, 50 * kUs));
  // Whole periods apart: the same windows.
  EXPECT_FALSE(epoch_moved(5 * kMs, 5 * kMs + 7 * p, p, 50 * kUs));
  // Near a whole period apart, from either side.
  EXPECT_FALSE(epoch_moved(5 * kMs, 5 * kMs + p - 10 * kUs, p, 50 * kUs));
  EXPECT_FALSE(epoch_moved(5 * kMs + p - 10 * kUs, 5 * kMs, p, 50 * kUs));
  EXPECT_TRUE(epoch_moved(0, p / 2, p, 50 * kUs));
  EXPECT_FALSE(epoch_moved(0, p / 2, 0, 50 * kUs));
}

}  // namespace
}  // namespace egpu::faa
