// The time-slicing model as pure code: an in-memory DeviceTimeline and a
// synthetic clock.
#include "model/timeline.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace egpu::simgpu {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSlice = 2 * kMs;

struct Fixture {
  std::unique_ptr<DeviceTimeline> tl = std::make_unique<DeviceTimeline>();
  Fixture() { init_timeline(*tl, kSlice, 0); }

  uint32_t add_context(int pid) {
    const int slot = claim_context(*tl, ProcessIdentity{pid, 0, 0}, "ctx", tl->now_ns);
    EXPECT_GE(slot, 0);
    return static_cast<uint32_t>(slot);
  }

  uint64_t kernel(uint32_t slot, uint64_t ns) {
    Op op{};
    op.kind = static_cast<uint32_t>(OpKind::kKernel);
    op.remaining_ns = ns;
    return enqueue_op(*tl, slot, op);
  }

  uint64_t record(uint32_t slot, uint32_t event_slot) {
    Op op{};
    op.kind = static_cast<uint32_t>(OpKind::kEventRecord);
    op.ref_slot = event_slot;
    return enqueue_op(*tl, slot, op);
  }

  // Keeps `depth` ops of `ns` queued in each context while advancing in
  // steps, as an always-busy process would.
  void run_busy(const std::vector<uint32_t>& slots, uint64_t ns, uint32_t depth, uint64_t until,
                uint64_t step) {
    while (tl->now_ns < until) {
      for (uint32_t s : slots) {
        while (queued_ops(tl->contexts[s]) < depth)
          kernel(s, ns);
      }
      advance_timeline(*tl, std::min(tl->now_ns + step, until));
    }
  }

  uint64_t busy(uint32_t slot) const { return tl->contexts[slot].busy_ns; }
  uint64_t stamp(uint32_t slot, uint32_t event_slot) const {
    return tl->contexts[slot].events[event_slot].device_ns;
  }
};

double share(uint64_t part, uint64_t whole) {
  return static_cast<double>(part) / static_cast<double>(whole);
}

TEST(Timeline, TwoBusyContextsShareEvenly) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.run_busy({a, b}, 1 * kMs, 8, 1000 * kMs, 3 * kMs + 17);
  EXPECT_NEAR(share(f.busy(a), 1000 * kMs), 0.5, 0.01);
  EXPECT_NEAR(share(f.busy(b), 1000 * kMs), 0.5, 0.01);
  EXPECT_EQ(f.tl->busy_ns, 1000 * kMs);  // never idle while work is queued
}

TEST(Timeline, ThreeBusyContextsShareEvenly) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  const uint32_t c = f.add_context(3);
  f.run_busy({a, b, c}, 700'000, 6, 1000 * kMs, 5 * kMs + 3);
  for (uint32_t s : {a, b, c})
    EXPECT_NEAR(share(f.busy(s), 1000 * kMs), 1.0 / 3, 0.01);
}

TEST(Timeline, UnequalKernelLengthsStillShareByTime) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  // Long kernels are preempted at the slice, so 10 ms kernels do not win
  // against 0.5 ms ones.
  while (f.tl->now_ns < 1000 * kMs) {
    while (queued_ops(f.tl->contexts[a]) < 4)
      f.kernel(a, 10 * kMs);
    while (queued_ops(f.tl->contexts[b]) < 40)
      f.kernel(b, kMs / 2);
    advance_timeline(*f.tl, f.tl->now_ns + 7 * kMs);
  }
  EXPECT_NEAR(share(f.busy(a), 1000 * kMs), 0.5, 0.01);
  EXPECT_NEAR(share(f.busy(b), 1000 * kMs), 0.5, 0.01);
}

TEST(Timeline, ContextAloneGetsTheWholeDevice) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t idle = f.add_context(2);
  f.run_busy({a}, 3 * kMs, 4, 1000 * kMs, 10 * kMs);
  EXPECT_EQ(f.busy(a), 1000 * kMs);
  EXPECT_EQ(f.busy(idle), 0u);
}

TEST(Timeline, IdleDeviceAccumulatesNoBusyTime) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  f.kernel(a, 5 * kMs);
  advance_timeline(*f.tl, 100 * kMs);
  EXPECT_EQ(f.busy(a), 5 * kMs);
  EXPECT_EQ(f.tl->busy_ns, 5 * kMs);
  EXPECT_EQ(queued_ops(f.tl->contexts[a]), 0u);
}

TEST(Timeline, PreemptionMidKernelKeepsTheRemainder) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.kernel(a, 5 * kMs);
  f.record(a, 0);
  f.kernel(b, 5 * kMs);
  f.record(b, 0);
  advance_timeline(*f.tl, 2 * kMs);  // a ran its slice
  EXPECT_EQ(f.busy(a), 2 * kMs);
  EXPECT_EQ(f.tl->contexts[a].ops[0].remaining_ns, 3 * kMs);
  advance_timeline(*f.tl, 4 * kMs);  // then b
  EXPECT_EQ(f.busy(b), 2 * kMs);
  advance_timeline(*f.tl, 20 * kMs);
  // a: 0-2, 4-6, 8-9 (done); b: 2-4, 6-8, 9-10 (done).
  EXPECT_EQ(f.stamp(a, 0), 9 * kMs);
  EXPECT_EQ(f.stamp(b, 0), 10 * kMs);
  EXPECT_EQ(f.busy(a), 5 * kMs);
  EXPECT_EQ(f.busy(b), 5 * kMs);
}

TEST(Timeline, EventsCarryDeviceTime) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  advance_timeline(*f.tl, 7 * kMs);
  const uint64_t start = f.record(a, 3);
  f.kernel(a, 2 * kMs);
  f.kernel(a, 3 * kMs);
  const uint64_t end = f.record(a, 4);
  advance_timeline(*f.tl, 8 * kMs);
  EXPECT_TRUE(seq_completed(*f.tl, a, start));
  EXPECT_FALSE(seq_completed(*f.tl, a, end));
  advance_timeline(*f.tl, 50 * kMs);
  EXPECT_TRUE(seq_completed(*f.tl, a, end));
  EXPECT_EQ(f.tl->contexts[a].events[3].seq, start);
  EXPECT_EQ(f.stamp(a, 3), 7 * kMs);
  EXPECT_EQ(f.stamp(a, 4), 12 * kMs);
}

TEST(Timeline, EventsAreStampedWhenTheirContextIsScheduled) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.kernel(b, 100 * kMs);
  advance_timeline(*f.tl, kMs);  // b holds the engine
  f.record(a, 0);
  f.kernel(a, 4 * kMs);
  f.record(a, 1);
  advance_timeline(*f.tl, 200 * kMs);
  // b keeps the rest of its slice; a's commands, its first event record
  // included, are processed from 2 ms on; a runs 2-4 and 6-8, so the elapsed
  // time still includes b's slice in between (as on a time-sliced GPU).
  EXPECT_EQ(f.stamp(a, 0), 2 * kMs);
  EXPECT_EQ(f.stamp(a, 1), 8 * kMs);
}

TEST(Timeline, EventOnAnIdleEngineIsStampedAtOnce) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  advance_timeline(*f.tl, 3 * kMs);
  f.record(a, 0);
  advance_timeline(*f.tl, 3 * kMs);
  EXPECT_EQ(f.stamp(a, 0), 3 * kMs);
}

TEST(Timeline, QueueFullUntilTheHeadCompletes) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  for (uint32_t i = 0; i < kQueueDepth; ++i)
    f.kernel(a, kMs);
  EXPECT_TRUE(queue_full(f.tl->contexts[a]));
  advance_timeline(*f.tl, kMs / 2);
  EXPECT_TRUE(queue_full(f.tl->contexts[a]));
  EXPECT_EQ(completion_lower_bound_ns(*f.tl, a, f.tl->contexts[a].completed_seq + 1), kMs / 2);
  advance_timeline(*f.tl, kMs);
  EXPECT_FALSE(queue_full(f.tl->contexts[a]));
  EXPECT_EQ(queued_ops(f.tl->contexts[a]), kQueueDepth - 1);
}

TEST(Timeline, CompletionBoundCountsTheHoldersSlice) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.kernel(a, 10 * kMs);
  advance_timeline(*f.tl, kMs / 2);  // a holds the engine
  const uint64_t seq = f.kernel(b, kMs);
  // b needs its own 1 ms after a's remaining 1.5 ms of slice.
  EXPECT_EQ(completion_lower_bound_ns(*f.tl, b, seq), kMs + 3 * kMs / 2);
  EXPECT_EQ(completion_lower_bound_ns(*f.tl, a, 1), 19 * kMs / 2);
}

TEST(Timeline, DeadContextsWorkIsDropped) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.run_busy({a, b}, kMs, 8, 100 * kMs, 5 * kMs);
  const uint64_t busy_a = f.busy(a);
  retire_context(*f.tl, a, f.tl->now_ns);
  EXPECT_EQ(queued_ops(f.tl->contexts[a]), 0u);
  f.run_busy({b}, kMs, 8, 200 * kMs, 5 * kMs);
  EXPECT_EQ(f.busy(a), busy_a);
  EXPECT_EQ(f.busy(b), 200 * kMs - busy_a);
  EXPECT_FALSE(context_matches(*f.tl, a, f.tl->contexts[a].generation));
}

TEST(Timeline, ZeroTimeKernelsCompleteAtOnce) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.kernel(b, 50 * kMs);
  advance_timeline(*f.tl, kMs);
  const uint64_t seq = f.kernel(a, 0);
  advance_timeline(*f.tl, kMs);  // no time passes: still done at once
  EXPECT_TRUE(seq_completed(*f.tl, a, seq));
}

TEST(Timeline, WaitOpBlocksUntilTheOtherContextGetsThere) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  const uint64_t a_seq = f.kernel(a, 3 * kMs);
  Op wait{};
  wait.kind = static_cast<uint32_t>(OpKind::kWait);
  wait.ref_slot = a;
  wait.ref_generation = f.tl->contexts[a].generation;
  wait.wait_seq = a_seq;
  enqueue_op(*f.tl, b, wait);
  f.kernel(b, kMs);
  f.record(b, 0);
  advance_timeline(*f.tl, 20 * kMs);
  // b may not start before a's kernel completes at 3 ms.
  EXPECT_EQ(f.stamp(b, 0), 4 * kMs);
  EXPECT_EQ(f.busy(b), kMs);
}

TEST(Timeline, WaitOnARetiredContextDoesNotBlock) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  const uint64_t a_seq = f.kernel(a, 100 * kMs);
  Op wait{};
  wait.kind = static_cast<uint32_t>(OpKind::kWait);
  wait.ref_slot = a;
  wait.ref_generation = f.tl->contexts[a].generation;
  wait.wait_seq = a_seq;
  enqueue_op(*f.tl, b, wait);
  const uint64_t b_seq = f.kernel(b, kMs);
  advance_timeline(*f.tl, 5 * kMs);
  EXPECT_FALSE(seq_completed(*f.tl, b, b_seq));
  retire_context(*f.tl, a, 5 * kMs);
  advance_timeline(*f.tl, 6 * kMs);
  EXPECT_TRUE(seq_completed(*f.tl, b, b_seq));
}

TEST(Timeline, ClaimReusesTheLongestRetiredSlot) {
  Fixture f;
  for (uint32_t i = 0; i < kMaxContexts; ++i)
    f.add_context(static_cast<int>(i + 1));
  EXPECT_EQ(claim_context(*f.tl, ProcessIdentity{99, 0, 0}, "x", 0), -1);
  retire_context(*f.tl, 7, 10);
  retire_context(*f.tl, 3, 20);
  const uint32_t old_generation = f.tl->contexts[7].generation;
  EXPECT_EQ(claim_context(*f.tl, ProcessIdentity{99, 0, 0}, "x", 30), 7);
  EXPECT_EQ(f.tl->contexts[7].generation, old_generation + 1);
  EXPECT_EQ(f.tl->contexts[7].busy_ns, 0u);
  EXPECT_EQ(claim_context(*f.tl, ProcessIdentity{100, 0, 0}, "y", 40), 3);
}

TEST(Timeline, LabelIsTruncatedAndTerminated) {
  Fixture f;
  const int slot = claim_context(*f.tl, ProcessIdentity{1, 0, 0}, std::string(100, 'x'), 0);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(std::string(f.tl->contexts[slot].label).size(), kLabelBytes - 1);
}

TEST(Timeline, RepairRebuildsDerivedState) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  const uint32_t b = f.add_context(2);
  f.kernel(a, kMs);
  f.kernel(b, kMs);
  f.tl->pending_mask = 0;                               // lost by an interrupted update
  f.tl->contexts[b].tail = f.tl->contexts[b].head - 1;  // impossible ring
  f.tl->running = 1000;
  repair_timeline(*f.tl);
  EXPECT_EQ(f.tl->pending_mask, uint64_t{1} << a);
  EXPECT_EQ(queued_ops(f.tl->contexts[b]), 0u);
  EXPECT_EQ(f.tl->running, -1);
  advance_timeline(*f.tl, 10 * kMs);
  EXPECT_EQ(f.busy(a), kMs);
}

TEST(Timeline, ClockNeverRunsBackwards) {
  Fixture f;
  const uint32_t a = f.add_context(1);
  f.kernel(a, 10 * kMs);
  advance_timeline(*f.tl, 5 * kMs);
  advance_timeline(*f.tl, 3 * kMs);
  EXPECT_EQ(f.tl->now_ns, 5 * kMs);
  EXPECT_EQ(f.busy(a), 5 * kMs);
}

}  // namespace
}  // namespace egpu::simgpu
