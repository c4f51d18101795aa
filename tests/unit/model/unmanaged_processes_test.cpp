#include "core/model/unmanaged_processes.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace egpu::model {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr uint32_t kAlice = 1001;
constexpr uint32_t kBob = 1002;

GpuProcessSighting sighting(int32_t pid, uint32_t uid, std::vector<uint32_t> gpus,
                            uint64_t start = 100, std::vector<int32_t> ancestors = {1},
                            bool shim = false) {
  return {pid, start, uid, std::move(gpus), std::move(ancestors), shim};
}

// GPU 0: Alice's instance; GPU 1: Bob's.
const std::vector<std::set<uint32_t>> kOwners = {{kAlice}, {kBob}};
const AttachedProcesses kNone;

TEST(UnmanagedProcessWatch, AProcessWithoutTheShimIsDueOnceItsUsersStreakPassesTheGrace) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0})};
  EXPECT_TRUE(watch.observe(0, scan, kOwners, kNone).empty());
  ASSERT_EQ(watch.current().size(), 1u);
  EXPECT_FALSE(watch.current()[0].due);
  EXPECT_TRUE(watch.observe(kS, scan, kOwners, kNone).empty());  // within the grace
  const auto due = watch.observe(2 * kS, scan, kOwners, kNone);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].pid, 10);
  EXPECT_EQ(due[0].gpu, 0u);
  EXPECT_EQ(due[0].uid, kAlice);
  EXPECT_EQ(due[0].first_seen_ns, 0);
  EXPECT_TRUE(due[0].first);
  // Still seen (a kill that did not take): due again, not for the first time.
  const auto again = watch.observe(3 * kS, scan, kOwners, kNone);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].first);
  EXPECT_TRUE(watch.current()[0].due);
  EXPECT_EQ(watch.total_due(), 1u);
  EXPECT_EQ(watch.scans(), 4u);
}

TEST(UnmanagedProcessWatch, TheGraceCountsFromTheFirstScanThatSeesOne) {
  UnmanagedProcessWatch watch;
  EXPECT_TRUE(watch.observe(100 * kS, {}, kOwners, kNone).empty());
  EXPECT_TRUE(watch.observe(200 * kS, {sighting(10, kAlice, {0})}, kOwners, kNone).empty());
}

TEST(UnmanagedProcessWatch, AttachedProcessesAndTheirDescendantsWithTheShimAreManaged) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {
      sighting(10, kAlice, {0}, 100, {1}, true),          // attached itself
      sighting(11, kAlice, {0}, 100, {10, 1}, true),      // forked from it (a DataLoader worker)
      sighting(12, kAlice, {0}, 100, {11, 10, 1}, true),  // and from that one
  };
  for (int64_t t = 0; t <= 10 * kS; t += kS)
    EXPECT_TRUE(watch.observe(t, scan, kOwners, {{10, {0}}}).empty()) << t;
  EXPECT_TRUE(watch.current().empty());
}

// Attached and then exec'd without LD_PRELOAD (same pid), or forked and
// exec'd so by an attached process: no shim, so not managed.
TEST(UnmanagedProcessWatch, WithoutTheShimAttachmentOrAncestryIsNotEnough) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {
      sighting(10, kAlice, {0}, 100, {1}, false),
      sighting(11, kAlice, {0}, 100, {10, 1}, false),
  };
  watch.observe(0, scan, kOwners, {{10, {0}}});
  EXPECT_EQ(watch.observe(2 * kS, scan, kOwners, {{10, {0}}}).size(), 2u);
}

// The shim mapped but never attached, nor below an attached process: it
// runs outside its share all the same (its attach refused as not its job's,
// or never asked).
TEST(UnmanagedProcessWatch, TheShimWithoutAnAttachmentIsNotEnough) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0}, 100, {1}, true)};
  watch.observe(0, scan, kOwners, {{99, {0}}});
  EXPECT_EQ(watch.observe(2 * kS, scan, kOwners, {{99, {0}}}).size(), 1u);
}

// Attached on one GPU, driving another (its EGPU_* environment names one
// GPU of its step for another): managed on the first only, and so are the
// processes forked from it.
TEST(UnmanagedProcessWatch, AnAttachmentOnOneGpuDoesNotCoverAnother) {
  UnmanagedProcessWatch watch;
  const std::vector<std::set<uint32_t>> owners = {{kAlice}, {kAlice}};
  const std::vector<GpuProcessSighting> scan = {
      sighting(10, kAlice, {0, 1}, 100, {1}, true),
      sighting(11, kAlice, {1}, 100, {10, 1}, true),
  };
  const AttachedProcesses attached = {{10, {0}}};
  watch.observe(0, scan, owners, attached);
  const auto due = watch.observe(2 * kS, scan, owners, attached);
  ASSERT_EQ(due.size(), 2u);
  for (const auto& p : due) {
    EXPECT_EQ(p.gpu, 1u) << p.pid;
    EXPECT_TRUE(p.maps_shim) << p.pid;
  }
  EXPECT_TRUE(watch.observe(3 * kS, scan, owners, {{10, {0, 1}}}).empty());
}

TEST(UnmanagedProcessWatch, RootAndOtherUsersProcessesAreNotJudged) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {
      sighting(11, 0, {0, 1}),    // root: daemons, slurmstepd
      sighting(12, 999, {0}),     // owns no instance (nvidia-persistenced)
      sighting(13, kBob, {0}),    // Bob's instance is on GPU 1, not 0
      sighting(14, kAlice, {7}),  // not a managed GPU
  };
  for (int64_t t = 0; t <= 10 * kS; t += kS)
    EXPECT_TRUE(watch.observe(t, scan, kOwners, kNone).empty()) << t;
  EXPECT_TRUE(watch.current().empty());
}

TEST(UnmanagedProcessWatch, EachGpuOfAProcessIsJudgedOnItsOwn) {
  UnmanagedProcessWatch watch;
  const std::vector<std::set<uint32_t>> owners = {{kAlice}, {kAlice, kBob}};
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0, 1})};
  watch.observe(0, scan, owners, kNone);
  const auto due = watch.observe(2 * kS, scan, owners, kNone);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].gpu + due[1].gpu, 1u);
}

// The grace is the user's on the GPU, and a scan or two without one does not
// end it: processes one after another with gaps are due once the streak
// passes the grace; one without the shim at first sight (one that lives
// less than a scan period is met by a scan once at most).
TEST(UnmanagedProcessWatch, ARelayWithGapsIsCaught) {
  UnmanagedProcessWatch watch;
  const auto one = [](int32_t pid) {
    return std::vector<GpuProcessSighting>{sighting(pid, kAlice, {0})};
  };
  EXPECT_TRUE(watch.observe(0, one(10), kOwners, kNone).empty());
  EXPECT_TRUE(watch.observe(kS, one(10), kOwners, kNone).empty());  // within the grace
  EXPECT_TRUE(watch.observe(2 * kS, {}, kOwners, kNone).empty());   // a gap
  const auto due = watch.observe(3 * kS, one(11), kOwners, kNone);  // its first scan
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].pid, 11);
  EXPECT_EQ(due[0].first_seen_ns, 3 * kS);
  EXPECT_EQ(watch.observe(4 * kS, one(12), kOwners, kNone).size(), 1u);
}

// A process with the shim seen once is never due, whatever its user's
// streak: an honest one caught between the driver's cuInit and its attach.
TEST(UnmanagedProcessWatch, AProcessWithTheShimSeenOnceIsNeverDue) {
  UnmanagedProcessWatch watch;
  const GpuProcessSighting escaped = sighting(10, kAlice, {0});
  const GpuProcessSighting attaching = sighting(12, kAlice, {0}, 100, {1}, /*shim=*/true);
  watch.observe(0, {escaped}, kOwners, kNone);
  EXPECT_EQ(watch.observe(2 * kS, {escaped}, kOwners, kNone).size(), 1u);
  const auto due = watch.observe(3 * kS, {escaped, attaching}, kOwners, kNone);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].pid, 10);
  EXPECT_EQ(watch.observe(4 * kS, {escaped, attaching}, kOwners, kNone).size(), 2u);
}

TEST(UnmanagedProcessWatch, ThreeScansWithoutOneEndTheStreak) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> escaped = {sighting(10, kAlice, {0})};
  watch.observe(0, escaped, kOwners, kNone);
  for (int64_t t = kS; t <= 3 * kS; t += kS)
    watch.observe(t, {}, kOwners, kNone);  // three without: streak and process forgotten
  EXPECT_TRUE(watch.observe(4 * kS, escaped, kOwners, kNone).empty());
  EXPECT_TRUE(watch.observe(5 * kS, escaped, kOwners, kNone).empty());
  EXPECT_EQ(watch.observe(6 * kS, escaped, kOwners, kNone).size(), 1u);
}

// (With the shim: seen in two scans before it is due.)
TEST(UnmanagedProcessWatch, AReusedPidIsAnotherProcessInTheSameStreak) {
  UnmanagedProcessWatch watch;
  const auto with_shim = [](uint64_t start) {
    return std::vector<GpuProcessSighting>{sighting(10, kAlice, {0}, start, {1}, true)};
  };
  watch.observe(0, with_shim(100), kOwners, kNone);
  EXPECT_TRUE(watch.observe(2 * kS, with_shim(200), kOwners, kNone).empty());
  const auto due = watch.observe(3 * kS, with_shim(200), kOwners, kNone);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].start_time, 200u);
  EXPECT_EQ(due[0].first_seen_ns, 2 * kS);
}

// A scan given up at pid 20 saw nothing above it: pid 30 is kept as it was
// (and, without the shim, becomes due in time); pid 10, below, was looked
// at and is gone. (20 has the shim, so that, seen once, it is not due.)
TEST(UnmanagedProcessWatch, AScanGivenUpKeepsWhatItDidNotReach) {
  UnmanagedProcessWatch watch;
  const auto with_shim = [](int32_t pid) { return sighting(pid, kAlice, {0}, 100, {1}, true); };
  watch.observe(0, {with_shim(10), sighting(30, kAlice, {0})}, kOwners, kNone);
  const auto due = watch.observe(2 * kS, {with_shim(20)}, kOwners, kNone, 20);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].pid, 30);
  EXPECT_EQ(due[0].first_seen_ns, 0);
  EXPECT_EQ(watch.current().size(), 2u);  // 20 and 30
}

// Alice's honest process 30 is seen once between its cuInit and its attach;
// then Bob's process 20 (lower pid) makes the scans stick on it. Kept as it
// was, 30 must not become due by scans that never saw it: another user's
// stuck maps would have the agent kill an attached process. Once attached it
// is dropped; unattached, it waits to be seen again.
TEST(UnmanagedProcessWatch, AScanGivenUpNeverMakesDueWhatItDidNotSee) {
  UnmanagedProcessWatch watch;
  const GpuProcessSighting honest = sighting(30, kAlice, {0}, 100, {1}, true);
  watch.observe(0, {honest}, kOwners, kNone);
  const GpuProcessSighting stuck = sighting(20, kBob, {1});
  const auto includes_30 = [](const std::vector<UnmanagedProcess>& due) {
    return std::any_of(due.begin(), due.end(), [](const auto& p) { return p.pid == 30; });
  };
  EXPECT_FALSE(includes_30(watch.observe(2 * kS, {stuck}, kOwners, kNone, 20)));
  EXPECT_FALSE(includes_30(watch.observe(4 * kS, {stuck}, kOwners, kNone, 20)));
  const AttachedProcesses attached = {{30, {0}}};
  watch.observe(5 * kS, {stuck}, kOwners, attached, 20);
  for (const UnmanagedProcess& p : watch.current())
    EXPECT_NE(p.pid, 30) << "an attached process is still listed unmanaged";
  // Not attached after all, and seen again: now it is due.
  UnmanagedProcessWatch unattached;
  unattached.observe(0, {honest}, kOwners, kNone);
  EXPECT_FALSE(includes_30(unattached.observe(2 * kS, {stuck}, kOwners, kNone, 20)));
  EXPECT_TRUE(includes_30(unattached.observe(3 * kS, {honest, stuck}, kOwners, kNone)));
}

TEST(UnmanagedProcessWatch, AnInstanceEndedMeansItsUserIsNoLongerJudgedThere) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0})};
  watch.observe(0, scan, kOwners, kNone);
  const std::vector<std::set<uint32_t>> none = {{}, {}};
  EXPECT_TRUE(watch.observe(2 * kS, scan, none, kNone).empty());
  EXPECT_TRUE(watch.current().empty());
}

}  // namespace
}  // namespace egpu::model
