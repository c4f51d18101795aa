// Gang windows (core/faa/gang_window.h): placement, phases, clock checks,
// and a data-parallel step on two GPUs replayed in simulated time beside
// greedy co-tenants, sliced as a gang and independently.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <random>

#include "core/faa/gang_grants.h"
#include "core/faa/gang_window.h"
#include "replay/policy_replay.h"

namespace egpu::faa {
namespace {

constexpr Nanos kMs = kMillisecond;
constexpr Nanos kUs = kMicrosecond;

TEST(GangWindow, ValidateNamesTheField) {
  EXPECT_TRUE(validate(GangWindow{0, 20 * kMs, 5 * kMs, 10 * kMs}).ok());
  EXPECT_NE(validate(GangWindow{0, 0, 0, 1}).error().find("period"), std::string::npos);
  EXPECT_NE(validate(GangWindow{0, 20 * kMs, 0, 0}).error().find("length"), std::string::npos);
  EXPECT_NE(validate(GangWindow{0, 20 * kMs, 0, 21 * kMs}).error().find("length"),
            std::string::npos);
  EXPECT_NE(validate(GangWindow{0, 20 * kMs, 15 * kMs, 10 * kMs}).error().find("offset"),
            std::string::npos);
  EXPECT_NE(validate(GangWindow{0, 20 * kMs, -1, 10 * kMs}).error().find("offset"),
            std::string::npos);
}

TEST(GangWindow, PhaseIsTheOpenWindowOrTheNextOne) {
  const GangWindow w{100 * kMs, 20 * kMs, 5 * kMs, 10 * kMs};
  // Windows: [105, 115), [125, 135), ... and, before the epoch, [85, 95).
  const WindowPhase in = window_at(w, 110 * kMs);
  EXPECT_TRUE(in.open);
  EXPECT_EQ(in.start, 105 * kMs);
  EXPECT_EQ(in.end, 115 * kMs);
  const WindowPhase after = window_at(w, 115 * kMs);
  EXPECT_FALSE(after.open);
  EXPECT_EQ(after.start, 125 * kMs);
  const WindowPhase before_offset = window_at(w, 101 * kMs);
  EXPECT_FALSE(before_offset.open);
  EXPECT_EQ(before_offset.start, 105 * kMs);
  const WindowPhase before_epoch = window_at(w, 90 * kMs);
  EXPECT_TRUE(before_epoch.open);
  EXPECT_EQ(before_epoch.start, 85 * kMs);
  const WindowPhase gap_before_epoch = window_at(w, 97 * kMs);
  EXPECT_FALSE(gap_before_epoch.open);
  EXPECT_EQ(gap_before_epoch.start, 105 * kMs);
}

TEST(GangWindow, LengthFollowsTheShare) {
  EXPECT_EQ(window_length(0.5, 20 * kMs), 10 * kMs);
  EXPECT_EQ(window_length(0.3, 20 * kMs), 6 * kMs);
  EXPECT_EQ(window_length(2.0, 20 * kMs), 20 * kMs);
  EXPECT_EQ(window_length(0.0, 20 * kMs), 1);
}

// A gang that keeps its offset is placed there before any gang without
// one, whatever their order; one whose kept offset no longer fits (it grew,
// or another kept one is there) is placed first fit like the rest.
TEST(GangWindow, AKeptOffsetIsPlacedFirstWhereItStillFits) {
  const Nanos p = 20 * kMs;
  const std::vector<GangRequest> gangs{
      {{0}, 6 * kMs, {}},         // first in order, but without an offset of its own
      {{0, 1}, 8 * kMs, 0},       // keeps 0
      {{1}, 4 * kMs, 4 * kMs},    // its 4 ms overlap the one before: first fit
      {{0}, 5 * kMs, 17 * kMs}};  // 17 + 5 > 20: first fit
  const auto placed = place_gangs(gangs, p);
  ASSERT_EQ(placed.size(), gangs.size());
  EXPECT_EQ(placed[1], 0);
  EXPECT_EQ(placed[0], 8 * kMs);
  EXPECT_EQ(placed[2], 8 * kMs);
  EXPECT_EQ(placed[3], 14 * kMs);
}

TEST(GangWindow, PlacementKeepsWindowsOnOneGpuApart) {
  const Nanos p = 20 * kMs;
  // A on GPUs 0,1; B on 1,2; C on 0,2; D on 3 alone; E does not fit on 0.
  const std::vector<GangRequest> gangs{{{0, 1}, 8 * kMs, {}},
                                       {{1, 2}, 6 * kMs, {}},
                                       {{0, 2}, 5 * kMs, {}},
                                       {{3}, 20 * kMs, {}},
                                       {{0}, 8 * kMs, {}}};
  const auto placed = place_gangs(gangs, p);
  ASSERT_EQ(placed.size(), gangs.size());
  EXPECT_EQ(placed[0], 0);
  EXPECT_EQ(placed[1], 8 * kMs);
  EXPECT_EQ(placed[2], 14 * kMs);  // after B on GPU 2 and A on GPU 0
  EXPECT_EQ(placed[3], 0);
  EXPECT_FALSE(placed[4].has_value());  // 0 holds 8 + 5 ms, 7 ms left: sliced on its own
  // Whatever the order and the offsets kept, no two placed windows on a GPU
  // overlap.
  std::mt19937_64 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<GangRequest> random;
    for (uint64_t g = 0; g < 6; ++g) {
      GangRequest r{{}, static_cast<Nanos>(rng() % 12 + 1) * kMs, {}};
      for (uint32_t gpu = 0; gpu < 4; ++gpu)
        if (rng() % 2 == 0) r.gpus.push_back(gpu);
      // Offsets kept from an earlier plan, some of which no longer fit.
      if (rng() % 2 == 0) r.keep = static_cast<Nanos>(rng() % 20) * kMs;
      random.push_back(r);
    }
    const auto offsets = place_gangs(random, p);
    for (std::size_t a = 0; a < random.size(); ++a) {
      if (!offsets[a]) continue;
      EXPECT_LE(*offsets[a] + random[a].length, p);
      for (std::size_t b = a + 1; b < random.size(); ++b) {
        if (!offsets[b]) continue;
        bool share_gpu = false;
        for (uint32_t x : random[a].gpus)
          for (uint32_t y : random[b].gpus)
            share_gpu = share_gpu || x == y;
        const bool overlap = *offsets[a] < *offsets[b] + random[b].length &&
                             *offsets[b] < *offsets[a] + random[a].length;
        EXPECT_FALSE(share_gpu && overlap) << "round " << round << " gangs " << a << ", " << b;
      }
    }
  }
}

TEST(GangWindow, AlignmentNeedsASynchronizedClockWithinTolerance) {
  EXPECT_TRUE(can_align_across_nodes({true, 100 * kUs}, kDefaultAlignTolerance).ok());
  const Status unsync = can_align_across_nodes({false, 0}, kDefaultAlignTolerance);
  EXPECT_NE(unsync.error().find("not synchronized"), std::string::npos);
  const Status far = can_align_across_nodes({true, 2 * kMs}, kDefaultAlignTolerance);
  EXPECT_NE(far.error().find("2000 us exceeds"), std::string::npos) << far.error();
}

TEST(GangWindow, PolicyRefusesABadWindowAndAnUnknownInstance) {
  auto policy = ArbiterPolicy::create(PolicySettings{}, 0);
  ASSERT_TRUE(policy.ok());
  ASSERT_TRUE(policy->join(1, 0.5, Mode::kBurst, 0).ok());
  EXPECT_FALSE(policy->set_gang_window(1, GangWindow{0, 20 * kMs, 0, 0}).ok());
  EXPECT_FALSE(policy->set_gang_window(2, GangWindow{0, 20 * kMs, 0, kMs}).ok());
  EXPECT_TRUE(policy->set_gang_window(1, GangWindow{0, 20 * kMs, 0, kMs}).ok());
  EXPECT_TRUE(policy->set_gang_window(1, std::nullopt).ok());
}

// A gang's members on a node's GPUs hold or skip a window together: the
// first look at it decides from the furthest-ahead member; a skip stands
// for the whole window, a hold until a member gets too far ahead in it.
// Members are (GPU, id): ids are slots of each GPU's page and repeat.
TEST(GangGrants, OneDecisionPerWindowForAllMembers) {
  GangGrants grants;
  const GangGrants::Member r0{0, 1};
  const GangGrants::Member r1{1, 1};  // the same slot on another GPU
  grants.note(7, r0, 0.01);
  grants.note(7, r1, 0.03);  // one member too far ahead: the gang skips
  EXPECT_FALSE(grants.holds(7, 20 * kMs, false));
  grants.note(7, r1, 0.0);  // caught up mid-window: the skip stands
  EXPECT_FALSE(grants.holds(7, 20 * kMs, false));
  EXPECT_TRUE(grants.holds(7, 40 * kMs, false));  // the next window
  grants.note(7, r0, 0.0);
  EXPECT_TRUE(grants.holds(7, 40 * kMs, false));
  grants.note(7, r0, 0.04);  // too far ahead in it: ended for both members
  EXPECT_FALSE(grants.holds(7, 40 * kMs, false));
  grants.note(7, r0, 0.0);
  EXPECT_FALSE(grants.holds(7, 40 * kMs, false));
  // Stopping wanting does not reopen it either, even for every member.
  grants.quiet(7, r0);
  grants.quiet(7, r1);
  grants.note(7, r1, 0.0);
  EXPECT_FALSE(grants.holds(7, 40 * kMs, false));
  grants.note(7, r0, 0.0);
  EXPECT_TRUE(grants.holds(7, 60 * kMs, false));
  // Across nodes: the looser limit, looked at afresh each time.
  grants.note(7, r1, 0.04);
  EXPECT_TRUE(grants.holds(7, 80 * kMs, true));
  grants.note(7, r1, 0.06);
  EXPECT_FALSE(grants.holds(7, 80 * kMs, true));
  grants.note(7, r1, 0.04);
  EXPECT_TRUE(grants.holds(7, 80 * kMs, true));
  // Another gang decides on its own members only.
  EXPECT_TRUE(grants.holds(8, 60 * kMs, false));
}

// Only being ahead counts: a member that claims to be far behind does not
// buy its gang a window another member is too far ahead for. A member that
// no longer wants its GPU no longer counts; a gang is forgotten with its
// last member.
TEST(GangGrants, BehindBuysNothingAndAbsentMembersDoNotCount) {
  GangGrants grants;
  grants.note(3, {0, 1}, -0.9);
  grants.note(3, {1, 2}, 0.05);
  EXPECT_FALSE(grants.holds(3, 0, false));
  grants.quiet(3, {1, 2});
  EXPECT_TRUE(grants.holds(3, 20 * kMs, false));
  grants.leave(3, {1, 9});  // unknown: nothing happens
  grants.leave(4, {0, 1});
  EXPECT_EQ(grants.gangs(), 1u);
  grants.leave(3, {0, 1});
  EXPECT_EQ(grants.gangs(), 1u);  // {1, 2} is still a member, if quiet
  grants.leave(3, {1, 2});
  EXPECT_EQ(grants.gangs(), 0u);
}

// In the agent, a policy's ids are slots of its GPU's page: a step's ranks
// on two GPUs often have the same one. One rank far ahead on GPU 1 makes
// the gang skip its window on GPU 0 too, even where GPU 0 looks first and
// its own rank, with the same id, is not ahead at all.
TEST(GangGrants, RanksWithTheSameSlotOnTwoGpusAreTwoMembers) {
  const auto grants = std::make_shared<GangGrants>();
  auto gpu0 = ArbiterPolicy::create(PolicySettings{}, 0);
  auto gpu1 = ArbiterPolicy::create(PolicySettings{}, 0);
  ASSERT_TRUE(gpu0.ok() && gpu1.ok());
  gpu0->share_gang_grants(grants, 0);
  gpu1->share_gang_grants(grants, 1);
  const GangWindow w{0, 20 * kMs, 10 * kMs, 10 * kMs, 42, false};
  ASSERT_TRUE(gpu0->join(0, 0.5, Mode::kBurst, 0).ok());  // the rank
  ASSERT_TRUE(gpu0->join(1, 0.5, Mode::kBurst, 0).ok());  // its co-tenant
  ASSERT_TRUE(gpu1->join(0, 0.5, Mode::kBurst, 0).ok());  // the other rank
  ASSERT_TRUE(gpu0->set_gang_window(0, w).ok() && gpu1->set_gang_window(0, w).ok());
  // GPU 1's rank runs alone for a second: far ahead of its half.
  Activity busy;
  busy.processes = 1;
  busy.busy = 1;
  busy.launched = true;
  busy.device_ns = kMs;
  Nanos now = 0;
  for (; now < 1009 * kMs; now += kMs)
    (void)gpu1->tick(now, {{0, busy}});
  ASSERT_GT(gpu1->scheduler().stats(0, now)->deviation, 0.1);
  // GPU 0 looks first at the window that opens at 1010 ms, its rank and
  // the co-tenant both asking.
  busy.device_ns = 0;
  (void)gpu0->tick(1010 * kMs, {{0, busy}, {1, busy}});
  EXPECT_TRUE(gpu0->asking(1)) << "the window is skipped: the co-tenant asks";
  (void)gpu1->tick(1010 * kMs, {{0, busy}});
  EXPECT_TRUE(gpu0->asking(1));
}

}  // namespace
}  // namespace egpu::faa
