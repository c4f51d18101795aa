#include "core/model/unmanaged_processes.h"

#include <gtest/gtest.h>

namespace egpu::model {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr uint32_t kAlice = 1001;
constexpr uint32_t kBob = 1002;

GpuProcessSighting sighting(int32_t pid, uint32_t uid, std::vector<uint32_t> gpus,
                            bool shim = false, uint64_t start = 100) {
  return {pid, start, uid, std::move(gpus), shim};
}

// GPU 0: Alice's instance; GPU 1: Bob's.
const std::vector<std::set<uint32_t>> kOwners = {{kAlice}, {kBob}};

TEST(UnmanagedProcessWatch, AProcessWithoutTheShimIsDueAfterTheGraceAndASecondScan) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0})};
  EXPECT_TRUE(watch.observe(0, scan, kOwners).empty());
  ASSERT_EQ(watch.current().size(), 1u);
  EXPECT_FALSE(watch.current()[0].due);
  EXPECT_TRUE(watch.observe(kS, scan, kOwners).empty());  // within the grace
  const auto due = watch.observe(2 * kS, scan, kOwners);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].pid, 10);
  EXPECT_EQ(due[0].gpu, 0u);
  EXPECT_EQ(due[0].uid, kAlice);
  EXPECT_EQ(due[0].first_seen_ns, 0);
  // Once: later scans report it in current(), not again as due.
  EXPECT_TRUE(watch.observe(3 * kS, scan, kOwners).empty());
  EXPECT_TRUE(watch.current()[0].due);
  EXPECT_EQ(watch.total_due(), 1u);
}

TEST(UnmanagedProcessWatch, OneScanIsNeverEnoughHoweverLongTheGapBefore) {
  UnmanagedProcessWatch watch;
  EXPECT_TRUE(watch.observe(100 * kS, {}, kOwners).empty());
  EXPECT_TRUE(watch.observe(200 * kS, {sighting(10, kAlice, {0})}, kOwners).empty());
}

TEST(UnmanagedProcessWatch, ShimmedRootAndOtherUsersProcessesAreNotJudged) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {
      sighting(10, kAlice, {0}, /*shim=*/true),  // managed (also a forked DataLoader worker)
      sighting(11, 0, {0, 1}),                   // root: daemons, slurmstepd
      sighting(12, 999, {0}),                    // owns no instance (nvidia-persistenced)
      sighting(13, kBob, {0}),                   // Bob's instance is on GPU 1, not 0
      sighting(14, kAlice, {7}),                 // not a managed GPU
  };
  for (int64_t t = 0; t <= 10 * kS; t += kS)
    EXPECT_TRUE(watch.observe(t, scan, kOwners).empty()) << t;
  EXPECT_TRUE(watch.current().empty());
}

TEST(UnmanagedProcessWatch, EachGpuOfAProcessIsJudgedOnItsOwn) {
  UnmanagedProcessWatch watch;
  const std::vector<std::set<uint32_t>> owners = {{kAlice}, {kAlice, kBob}};
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0, 1})};
  watch.observe(0, scan, owners);
  const auto due = watch.observe(2 * kS, scan, owners);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].gpu + due[1].gpu, 1u);
}

TEST(UnmanagedProcessWatch, AProcessGoneOrNowManagedStartsItsGraceAgain) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> escaped = {sighting(10, kAlice, {0})};
  watch.observe(0, escaped, kOwners);
  watch.observe(kS, {}, kOwners);  // not seen: forgotten
  EXPECT_TRUE(watch.observe(2 * kS, escaped, kOwners).empty());
  EXPECT_TRUE(watch.observe(3 * kS, {sighting(10, kAlice, {0}, true)}, kOwners).empty());
  EXPECT_TRUE(watch.observe(4 * kS, escaped, kOwners).empty());
  EXPECT_EQ(watch.observe(6 * kS, escaped, kOwners).size(), 1u);
}

TEST(UnmanagedProcessWatch, AReusedPidIsAnotherProcess) {
  UnmanagedProcessWatch watch;
  watch.observe(0, {sighting(10, kAlice, {0}, false, 100)}, kOwners);
  // Same pid, another start time: a new process, whose grace starts now.
  EXPECT_TRUE(watch.observe(2 * kS, {sighting(10, kAlice, {0}, false, 200)}, kOwners).empty());
  EXPECT_EQ(watch.observe(4 * kS, {sighting(10, kAlice, {0}, false, 200)}, kOwners).size(), 1u);
}

TEST(UnmanagedProcessWatch, AnInstanceEndedMeansItsUserIsNoLongerJudgedThere) {
  UnmanagedProcessWatch watch;
  const std::vector<GpuProcessSighting> scan = {sighting(10, kAlice, {0})};
  watch.observe(0, scan, kOwners);
  const std::vector<std::set<uint32_t>> none = {{}, {}};
  EXPECT_TRUE(watch.observe(2 * kS, scan, none).empty());
  EXPECT_TRUE(watch.current().empty());
}

}  // namespace
}  // namespace egpu::model
