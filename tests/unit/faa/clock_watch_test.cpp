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

// Readings a second apart, as the agent takes them.
Nanos g_now = 0;
Nanos tick() {
  return g_now += kSecond;
}

ClockWatch watch(int regain = 5) {
  return ClockWatch(ClockWatch::Settings{500 * kUs, regain});
}

TEST(ClockWatch, TheFirstReadingDecidesAtOnce) {
  ClockWatch good = watch();
  EXPECT_FALSE(good.aligned());
  EXPECT_EQ(good.observe(kGood, tick()), ClockWatch::Change::kNone);
  EXPECT_TRUE(good.aligned());
  EXPECT_TRUE(good.reason().empty());

  ClockWatch bad = watch();
  EXPECT_EQ(bad.observe(kUnsynced, tick()), ClockWatch::Change::kNone);
  EXPECT_FALSE(bad.aligned());
  EXPECT_NE(bad.reason().find("not synchronized"), std::string::npos) << bad.reason();
}

TEST(ClockWatch, ABadReadingEndsAlignmentAtOnce) {
  ClockWatch w = watch();
  w.observe(kGood, tick());
  EXPECT_EQ(w.observe(kGood, tick()), ClockWatch::Change::kNone);
  EXPECT_EQ(w.observe({true, 2 * kMs}, tick()), ClockWatch::Change::kLost);
  EXPECT_FALSE(w.aligned());
  EXPECT_NE(w.reason().find("2000 us exceeds"), std::string::npos) << w.reason();
  ClockWatch u = watch();
  u.observe(kGood, tick());
  EXPECT_EQ(u.observe(kUnsynced, tick()), ClockWatch::Change::kLost);
  EXPECT_NE(u.reason().find("not synchronized"), std::string::npos) << u.reason();
}

TEST(ClockWatch, AlignmentComesBackAfterGoodReadingsInARow) {
  ClockWatch w = watch(5);
  w.observe(kGood, tick());
  ASSERT_EQ(w.observe(kUnsynced, tick()), ClockWatch::Change::kLost);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(w.observe(kGood, tick()), ClockWatch::Change::kNone) << i;
    EXPECT_FALSE(w.aligned());
    EXPECT_NE(w.reason().find(std::to_string(i) + " of 5"), std::string::npos) << w.reason();
  }
  EXPECT_EQ(w.observe(kGood, tick()), ClockWatch::Change::kRegained);
  EXPECT_TRUE(w.aligned());
  EXPECT_TRUE(w.reason().empty());
}

TEST(ClockWatch, ABadReadingWhileRegainingStartsTheCountAgain) {
  ClockWatch w = watch(3);
  w.observe(kUnsynced, tick());
  w.observe(kGood, tick());
  w.observe(kGood, tick());
  w.observe({true, 600 * kUs}, tick());  // over the tolerance
  w.observe(kGood, tick());
  w.observe(kGood, tick());
  EXPECT_FALSE(w.aligned());
  EXPECT_EQ(w.observe(kGood, tick()), ClockWatch::Change::kRegained);
}

// An error that hovers around the tolerance (450-550 us against 500) moves
// the windows once, not at every crossing: inside the tolerance but above
// 3/4 of it does not count towards regaining.
TEST(ClockWatch, AnErrorHoveringAtTheToleranceDoesNotFlap) {
  ClockWatch w = watch(5);
  w.observe(kGood, tick());
  int changes = 0;
  for (int i = 0; i < 1000; ++i) {
    const Nanos error = (i % 2 == 0 ? 450 : 550) * kUs;
    if (w.observe({true, error}, tick()) != ClockWatch::Change::kNone) ++changes;
  }
  EXPECT_EQ(changes, 1);
  EXPECT_FALSE(w.aligned());
  w.observe({true, 450 * kUs}, tick());
  EXPECT_NE(w.reason().find("not yet under 375 us"), std::string::npos) << w.reason();
  // The margin: 375 us counts.
  for (int i = 0; i < 5; ++i)
    w.observe({true, 375 * kUs}, tick());
  EXPECT_TRUE(w.aligned());
}

// A kernel clock as a discipline leaves it: maxerror set at each update,
// then 500 us more every second.
struct KernelClock {
  Nanos set_at = 0;
  Nanos set_to = 5 * kMs;
  ClockQuality at(Nanos now) const {
    return {true, 100 * kUs, set_to + (now - set_at) / kSecond * 500 * kUs};
  }
};

// chronyd updating every 1024 s (its longest default poll) is alive all
// along; once it stops, esterror keeps its last value and only maxerror
// tells: the watch lets go past stale_after, not nine hours later.
TEST(ClockWatch, ADisciplineThatStopsUpdatingTheClockIsNoticed) {
  ClockWatch w = watch();
  KernelClock k;
  Nanos now = 0;
  w.observe(k.at(now), now);
  for (int s = 1; s <= 3 * 3600; ++s) {
    now = s * kSecond;
    if (s % 1024 == 0) {
      k.set_at = now;  // an update: maxerror back to the root distance
      k.set_to = 3 * kMs;
    }
    ASSERT_EQ(w.observe(k.at(now), now), ClockWatch::Change::kNone) << s;
    ASSERT_TRUE(w.aligned()) << s << ": " << w.reason();
  }
  // chronyd stops; the last update was at 3 h - (3 h mod 1024 s).
  const Nanos last = now / (1024 * kSecond) * (1024 * kSecond);
  ClockWatch::Change change = ClockWatch::Change::kNone;
  Nanos lost_at = 0;
  while (change == ClockWatch::Change::kNone && now < 12 * 3600 * kSecond) {
    now += kSecond;
    change = w.observe(k.at(now), now);
    lost_at = now;
  }
  EXPECT_EQ(change, ClockWatch::Change::kLost);
  EXPECT_NEAR(static_cast<double>(lost_at - last) / kSecond, 2101, 1.5);
  EXPECT_NE(w.reason().find("has not updated the clock for 2101 s"), std::string::npos)
      << w.reason();
  // It comes back: an update, then good readings.
  k.set_at = now;
  k.set_to = 2 * kMs;
  for (int i = 0; i < 5; ++i) {
    now += kSecond;
    change = w.observe(k.at(now), now);
  }
  EXPECT_EQ(change, ClockWatch::Change::kRegained) << w.reason();
}

// A discipline that updates every second (phc2sys) keeps maxerror flat:
// every reading is an update, however close the readings.
TEST(ClockWatch, UpdatesEverySecondAreNeverStale) {
  ClockWatch w = watch();
  Nanos now = 0;
  for (int i = 0; i < 10000; ++i) {
    now += kSecond + (i % 3 == 0 ? 1 : -1) * 200 * kMs;
    ASSERT_EQ(w.observe({true, 20 * kUs, 40 * kUs}, now), ClockWatch::Change::kNone) << i;
  }
  EXPECT_TRUE(w.aligned()) << w.reason();
}

// An agent restarted half an hour after chronyd died: its first reading's
// maxerror (grown 500 us a second since the last update) already says the
// discipline is gone. Taken as a fresh update, windows stayed aligned for
// another stale_after. Once an update comes, the clock is good again.
TEST(ClockWatch, AFirstReadingAlreadyPastTheGrowthOfStaleAfterIsStale) {
  ClockWatch w = watch();
  const Nanos grown = 1800 * kSecond / 2000;  // 30 min without an update
  EXPECT_EQ(w.observe({true, 20 * kUs, kSecond + grown}, 0), ClockWatch::Change::kNone);
  EXPECT_FALSE(w.aligned());
  EXPECT_NE(w.reason().find("chronyd"), std::string::npos) << w.reason();
  Nanos now = 0;
  ClockWatch::Change last = ClockWatch::Change::kNone;
  for (int i = 0; i < 10 && last != ClockWatch::Change::kRegained; ++i) {
    now += kSecond;
    last = w.observe({true, 20 * kUs, 40 * kUs + i * kMs / 2}, now);
  }
  EXPECT_EQ(last, ClockWatch::Change::kRegained) << w.reason();
  // A first reading of a recent update is fine.
  ClockWatch fresh = watch();
  fresh.observe({true, 20 * kUs, 300 * kMs}, 0);
  EXPECT_TRUE(fresh.aligned()) << fresh.reason();
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

// Gang windows re-planned on every step create, remove, resize and loan
// change: each re-plan read the epoch again, so one read a busy host
// preempted (2 ms between its monotonic reads) moved every window by half of
// that, away from the other nodes'. Only a well-dated read that moved past
// the slack (a stepped clock) moves them.
TEST(ClockWatch, GangWindowsMoveOnlyForAWellDatedStep) {
  const Nanos p = 20 * kMs;
  const Nanos slack = 10 * kUs;
  const Nanos moved = 50 * kUs;
  const Nanos placed = 5 * kMs;
  EXPECT_EQ(keep_or_move_epoch(0, placed, 2 * kMs, slack, p, moved), placed);  // the first
  EXPECT_EQ(keep_or_move_epoch(placed, placed + kMs, 2 * kMs, slack, p, moved), placed);
  EXPECT_EQ(keep_or_move_epoch(placed, placed + 3 * kUs, 4 * kUs, slack, p, moved), placed);
  EXPECT_EQ(keep_or_move_epoch(placed, placed + 3 * p, 4 * kUs, slack, p, moved), placed);
  EXPECT_EQ(keep_or_move_epoch(placed, placed + kMs, 4 * kUs, slack, p, moved), placed + kMs);
  // A hundred re-plans with jittered and preempted reads: the windows stay.
  Nanos epoch = placed;
  for (int i = 0; i < 100; ++i) {
    const Nanos jitter = (i % 7) * kUs - 3 * kUs;
    const Nanos uncertainty = i % 5 == 0 ? 2 * kMs : 5 * kUs;
    const Nanos read = placed + (i % 5 == 0 ? kMs : jitter) + i * p;
    epoch = keep_or_move_epoch(epoch, read, uncertainty, slack, p, moved);
  }
  EXPECT_EQ(epoch, placed);
}

}  // namespace
}  // namespace egpu::faa
