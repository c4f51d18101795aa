// Collectives in the pure model: two (or three) devices' timelines meeting
// on one CollectiveBoard, on a synthetic clock. A part spins on its engine
// until its group is complete, then runs its own time; what it spun is
// device time used; the board is empty once every part completed.
#include "model/collectives.h"

#include <gtest/gtest.h>

#include <memory>

#include "model/timeline.h"

namespace egpu::simgpu {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSlice = 2 * kMs;
constexpr uint64_t kGroup = 0xc011ec7;

struct Device {
  std::unique_ptr<DeviceTimeline> tl = std::make_unique<DeviceTimeline>();
  uint32_t ctx = 0;
  Device() {
    init_timeline(*tl, kSlice, 0);
    ctx = static_cast<uint32_t>(claim_context(*tl, ProcessIdentity{100, 0, 0}, "rank", 0));
  }
  uint64_t kernel(uint64_t ns, uint32_t on = UINT32_MAX) {
    Op op{};
    op.kind = static_cast<uint32_t>(OpKind::kKernel);
    op.remaining_ns = ns;
    return enqueue_op(*tl, on == UINT32_MAX ? ctx : on, op);
  }
  uint64_t collective(uint64_t ns, uint64_t group, uint32_t size) {
    Op op{};
    op.kind = static_cast<uint32_t>(OpKind::kCollective);
    op.remaining_ns = ns;
    op.group = group;
    op.group_size = size;
    return enqueue_op(*tl, ctx, op);
  }
  uint64_t record(uint32_t event) {
    Op op{};
    op.kind = static_cast<uint32_t>(OpKind::kEventRecord);
    op.ref_slot = event;
    return enqueue_op(*tl, ctx, op);
  }
  uint64_t stamp(uint32_t event) const { return tl->contexts[ctx].events[event].device_ns; }
};

struct CollectivesTest : ::testing::Test {
  std::unique_ptr<CollectiveBoard> board = std::make_unique<CollectiveBoard>();
  void SetUp() override { init_board(*board); }
  // Advances every device to `t` in steps of `step`, as processes polling
  // their own devices do.
  void run(std::initializer_list<Device*> devices, uint64_t until, uint64_t step) {
    for (uint64_t t = step; t <= until; t += step) {
      for (Device* d : devices)
        advance_timeline(*d->tl, t, board.get());
    }
  }
};

TEST_F(CollectivesTest, EachPartEndsItsTimeAfterTheLastMemberArrives) {
  Device a, b;
  // Rank 0 computes 3 ms, rank 1 computes 7 ms, then a 1 ms all-reduce.
  a.kernel(3 * kMs);
  b.kernel(7 * kMs);
  const uint64_t ca = a.collective(1 * kMs, kGroup, 2);
  const uint64_t cb = b.collective(1 * kMs, kGroup, 2);
  a.record(0);
  b.record(0);
  run({&a, &b}, 20 * kMs, 100'000);
  ASSERT_TRUE(seq_completed(*a.tl, a.ctx, ca));
  ASSERT_TRUE(seq_completed(*b.tl, b.ctx, cb));
  EXPECT_EQ(a.stamp(0), 8 * kMs);  // waited for rank 1's arrival at 7 ms
  EXPECT_EQ(b.stamp(0), 8 * kMs);
  // Rank 0 held its engine spinning from 3 to 7 ms: used, as NCCL's spin is.
  EXPECT_EQ(a.tl->contexts[a.ctx].busy_ns, 8 * kMs);
  EXPECT_EQ(rendezvous_in_use(*board), 0u);
}

TEST_F(CollectivesTest, APeerSeenLateStillEndsTheGroupAtItsArrival) {
  Device a, b;
  a.collective(2 * kMs, kGroup, 2);
  a.record(0);
  b.kernel(5 * kMs);
  b.collective(2 * kMs, kGroup, 2);
  b.record(0);
  // Device b is evaluated first up to 10 ms (its rank arrives at 5 ms), then
  // device a, which has spun since 0 and learns of it only now.
  advance_timeline(*a.tl, 1 * kMs, board.get());
  advance_timeline(*b.tl, 10 * kMs, board.get());
  advance_timeline(*a.tl, 10 * kMs, board.get());
  EXPECT_EQ(a.stamp(0), 7 * kMs);
  EXPECT_EQ(b.stamp(0), 7 * kMs);
  // And the other way round: a group complete in this device's future.
  Device c, d;
  c.collective(1 * kMs, kGroup + 1, 2);
  c.record(0);
  d.kernel(4 * kMs);
  d.collective(1 * kMs, kGroup + 1, 2);
  d.record(0);
  advance_timeline(*d.tl, 6 * kMs, board.get());  // d arrives at 4 ms and spins
  EXPECT_EQ(d.stamp(0), 0u) << "d cannot finish before c arrives";
  advance_timeline(*c.tl, 2 * kMs, board.get());  // c arrives at 0: the group is complete at 4 ms
  advance_timeline(*c.tl, 9 * kMs, board.get());
  advance_timeline(*d.tl, 9 * kMs, board.get());
  EXPECT_EQ(c.stamp(0), 5 * kMs);
  // d had been evaluated to 6 ms before: its part, credited from 4 ms, is
  // done as soon as it looks again (device time never runs backwards).
  EXPECT_EQ(d.stamp(0), 6 * kMs);
  EXPECT_EQ(rendezvous_in_use(*board), 0u);
}

TEST_F(CollectivesTest, ASpinningPartIsTimeSlicedAndNotCreditedWhileItWaitsElsewhere) {
  Device a, b;
  // Device a also runs a greedy context: the spinning part shares the engine.
  const int other = claim_context(*a.tl, ProcessIdentity{200, 0, 0}, "greedy", 0);
  ASSERT_GE(other, 0);
  for (int i = 0; i < 10; ++i)
    a.kernel(2 * kMs, static_cast<uint32_t>(other));
  a.collective(1 * kMs, kGroup, 2);
  a.record(0);
  b.kernel(6 * kMs);
  b.collective(1 * kMs, kGroup, 2);
  b.record(0);
  run({&a, &b}, 30 * kMs, 50'000);
  // The group completes at 6 ms; a's part needs 1 ms of engine after that,
  // and gets every other 2 ms slice.
  // 0-2 spin, 2-4 greedy, 4-6 spin, 6-8 greedy (its spin before 8 ms is not
  // credited: it did not hold the engine), 8-9 its own time.
  EXPECT_EQ(a.stamp(0), 9 * kMs);
  EXPECT_EQ(b.stamp(0), 7 * kMs);
  EXPECT_EQ(rendezvous_in_use(*board), 0u);
}

TEST_F(CollectivesTest, WithoutABoardAPartRunsAloneOnAFullOneItWaitsForAnEntry) {
  Device a;
  a.collective(2 * kMs, kGroup, 2);
  a.record(0);
  advance_timeline(*a.tl, 5 * kMs, nullptr);
  EXPECT_EQ(a.stamp(0), 2 * kMs);
  for (uint32_t i = 0; i < kMaxRendezvous; ++i)
    ASSERT_EQ(arrive(*board, 1000 + i, 1, 0), Arrival::kArrived);
  Device b;
  b.collective(2 * kMs, kGroup, 1);
  b.record(0);
  advance_timeline(*b.tl, 5 * kMs, board.get());
  EXPECT_EQ(b.stamp(0), 0u);  // spinning: no entry to meet its group on
  EXPECT_GE(board->overflows, 1u);
  depart(*board, 1000);  // a group completes: its entry is free
  advance_timeline(*b.tl, 10 * kMs, board.get());
  EXPECT_EQ(b.stamp(0), 7 * kMs);
  // An entry whose group never completed is taken back after a minute.
  ASSERT_EQ(arrive(*board, 2000, 1, 0), Arrival::kArrived);  // full again
  ASSERT_EQ(arrive(*board, 7, 2, 0), Arrival::kBoardFull);
  EXPECT_EQ(arrive(*board, 7, 2, kStaleRendezvousNs + 1), Arrival::kArrived);
}

TEST_F(CollectivesTest, AKeyUsedAgainNeverReleasesEarlyOrHangsTheFirstCallsPeers) {
  Device a, b;
  a.collective(1 * kMs, kGroup, 2);
  a.record(0);
  a.collective(1 * kMs, kGroup, 2);  // the program's bug: the same key again
  b.kernel(5 * kMs);
  b.collective(1 * kMs, kGroup, 2);
  b.record(0);
  run({&a, &b}, 20 * kMs, 100'000);
  // The first call completes for both at 6 ms, whatever a's second part did
  // meanwhile (met a complete group: ran alone; or a freed one: a new call).
  EXPECT_EQ(a.stamp(0), 6 * kMs);
  EXPECT_EQ(b.stamp(0), 6 * kMs);
  // A complete group's key arrives as reused, never as one more member.
  ASSERT_EQ(arrive(*board, 99, 1, 0), Arrival::kArrived);
  EXPECT_EQ(arrive(*board, 99, 1, 0), Arrival::kKeyReused);
}

TEST_F(CollectivesTest, AWaiterLooksAgainSoonWhileItsPeersAreMissing) {
  Device a;
  const uint64_t c = a.collective(0, kGroup, 3);
  advance_timeline(*a.tl, 1 * kMs, board.get());
  EXPECT_FALSE(seq_completed(*a.tl, a.ctx, c));
  EXPECT_EQ(completion_lower_bound_ns(*a.tl, a.ctx, c), kCollectivePollNs);
  ASSERT_EQ(arrive(*board, kGroup, 3, 2 * kMs), Arrival::kArrived);
  ASSERT_EQ(arrive(*board, kGroup, 3, 3 * kMs), Arrival::kArrived);
  advance_timeline(*a.tl, 4 * kMs, board.get());
  EXPECT_TRUE(seq_completed(*a.tl, a.ctx, c));
}

}  // namespace
}  // namespace egpu::simgpu
