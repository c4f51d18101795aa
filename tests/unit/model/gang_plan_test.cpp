#include "core/model/gang_plan.h"

#include <gtest/gtest.h>

namespace egpu::model {
namespace {

constexpr faa::Nanos kMs = faa::kMillisecond;

Instance inst(uint64_t id, uint64_t job, uint32_t step, uint32_t gpu, bool umbrella = false) {
  Instance i;
  i.id = id;
  i.job_id = job;
  i.step_id = step;
  i.gpu = gpu;
  i.umbrella = umbrella;
  return i;
}

TEST(GangPlan, AStepOnSeveralGpusIsAGangAtItsSmallestShare) {
  const std::vector<Instance> all{inst(1, 10, 0, 0), inst(2, 10, 0, 1), inst(3, 11, 0, 0),
                                  inst(4, 12, 0, 1), inst(5, 12, 0, 2)};
  std::vector<const Instance*> ptrs;
  for (const Instance& i : all)
    ptrs.push_back(&i);
  const GangPlan plan =
      plan_gangs(ptrs, {{1, 0.5}, {2, 0.4}, {3, 0.5}, {4, 0.3}, {5, 0.3}}, 20 * kMs, true);
  ASSERT_EQ(plan.windows.size(), 4u);  // instance 3 is a step on one GPU
  EXPECT_FALSE(plan.windows.contains(3));
  // Job 10: 40% of the period on GPUs 0 and 1, first.
  // A gang is named on the node by its first instance (GangGrants).
  EXPECT_EQ(plan.windows.at(1), (faa::GangWindow{0, 20 * kMs, 0, 8 * kMs, 1, false}));
  EXPECT_EQ(plan.windows.at(2), plan.windows.at(1));
  // Job 12 shares GPU 1 with job 10: it goes after it.
  EXPECT_EQ(plan.windows.at(4), (faa::GangWindow{0, 20 * kMs, 8 * kMs, 6 * kMs, 4, false}));
  EXPECT_EQ(plan.windows.at(5), plan.windows.at(4));
  EXPECT_TRUE(plan.unplaced.empty());
}

TEST(GangPlan, UmbrellasAndUnknownSharesMakeNoGang) {
  const std::vector<Instance> all{inst(1, 10, 4294967294u, 0, true),
                                  inst(2, 10, 4294967294u, 1, true), inst(3, 11, 0, 0),
                                  inst(4, 11, 0, 1)};
  std::vector<const Instance*> ptrs;
  for (const Instance& i : all)
    ptrs.push_back(&i);
  const GangPlan plan = plan_gangs(ptrs, {{1, 0.5}, {2, 0.5}, {3, 0.5}}, 20 * kMs, true);
  EXPECT_TRUE(plan.windows.empty());  // 4 has no share: no window for 3 either
}

TEST(GangPlan, AGangThatDoesNotFitIsReported) {
  // Two gangs on GPUs 0 and 1 at 60% each cannot both have windows.
  const std::vector<Instance> all{inst(1, 10, 0, 0), inst(2, 10, 0, 1), inst(3, 11, 0, 0),
                                  inst(4, 11, 0, 1)};
  std::vector<const Instance*> ptrs;
  for (const Instance& i : all)
    ptrs.push_back(&i);
  const GangPlan plan = plan_gangs(ptrs, {{1, 0.6}, {2, 0.6}, {3, 0.4}, {4, 0.6}}, 20 * kMs, true);
  EXPECT_EQ(plan.windows.size(), 4u);  // 60% + 40% fit
  const GangPlan over = plan_gangs(ptrs, {{1, 0.6}, {2, 0.6}, {3, 0.6}, {4, 0.6}}, 20 * kMs, true);
  EXPECT_EQ(over.windows.size(), 2u);
  ASSERT_EQ(over.unplaced.size(), 1u);
  EXPECT_EQ(over.unplaced[0], (std::pair<uint64_t, uint32_t>{11, 0}));
}

Instance across(uint64_t id, uint64_t job, uint32_t step, uint32_t gpu) {
  Instance i = inst(id, job, step, gpu);
  i.spans_nodes = true;
  return i;
}

// A step on two nodes with one GPU each: alone on each node, still a gang.
// Two nodes that host it beside different gangs of their own place it alike:
// multi-node steps go first, so the nodes' own gangs do not move it.
TEST(GangPlan, AMultiNodeStepIsAGangAtTheSameOffsetOnEveryNode) {
  // Node A: job 9's own gang (two GPUs, in job order before job 10) and job
  // 10, which spans nodes, on GPU 0.
  const std::vector<Instance> node_a{inst(1, 9, 0, 0), inst(2, 9, 0, 1), across(3, 10, 0, 0)};
  // Node B: job 10 alone on its GPU 0.
  const std::vector<Instance> node_b{across(7, 10, 0, 0)};
  std::vector<const Instance*> a, b;
  for (const Instance& i : node_a)
    a.push_back(&i);
  for (const Instance& i : node_b)
    b.push_back(&i);
  const GangPlan on_a = plan_gangs(a, {{1, 0.3}, {2, 0.3}, {3, 0.5}}, 20 * kMs, true);
  const GangPlan on_b = plan_gangs(b, {{7, 0.5}}, 20 * kMs, true);
  ASSERT_TRUE(on_a.windows.contains(3));
  ASSERT_TRUE(on_b.windows.contains(7));
  EXPECT_EQ(on_a.windows.at(3), (faa::GangWindow{0, 20 * kMs, 0, 10 * kMs, 3, true}));
  EXPECT_EQ(on_b.windows.at(7), (faa::GangWindow{0, 20 * kMs, 0, 10 * kMs, 7, true}));
  // Job 9, the node's own, fits after it.
  EXPECT_EQ(on_a.windows.at(1), (faa::GangWindow{0, 20 * kMs, 10 * kMs, 6 * kMs, 1, false}));
}

// Another user's multi-node step, earlier in (job, step) order, comes to
// one GPU of a running multi-node step on one of its nodes only. It must not
// move the running step's windows there: its ranks on the other node would
// hold theirs at another time, and every collective would wait out the
// difference. The newcomer fits around it.
TEST(GangPlan, ALaterMultiNodeStepDoesNotMoveARunningOnesWindowsOnOneNode) {
  const std::vector<Instance> node_a{across(1, 20, 0, 0)};
  const std::vector<Instance> node_b{across(7, 20, 0, 0), across(8, 5, 0, 0)};
  std::vector<const Instance*> a{&node_a[0]}, b_before{&node_b[0]}, b{&node_b[0], &node_b[1]};
  const GangPlan on_a = plan_gangs(a, {{1, 0.5}}, 20 * kMs, true);
  const GangPlan before = plan_gangs(b_before, {{7, 0.5}}, 20 * kMs, true);
  const GangPlan on_b = plan_gangs(b, {{7, 0.5}, {8, 0.3}}, 20 * kMs, true, before);
  ASSERT_TRUE(on_a.windows.contains(1) && on_b.windows.contains(7) && on_b.windows.contains(8));
  EXPECT_EQ(on_b.windows.at(7).offset, on_a.windows.at(1).offset);
  EXPECT_EQ(on_b.windows.at(8).offset, 10 * kMs);
  // Resizing in and out does not move it either.
  const GangPlan grown = plan_gangs(b, {{7, 0.5}, {8, 0.5}}, 20 * kMs, true, on_b);
  const GangPlan shrunk = plan_gangs(b, {{7, 0.5}, {8, 0.2}}, 20 * kMs, true, grown);
  EXPECT_EQ(grown.windows.at(7).offset, 0);
  EXPECT_EQ(shrunk.windows.at(7).offset, 0);
}

// While the clock disagrees the multi-node steps' offsets are remembered,
// not placed: when it agrees again a step goes back to where its other nodes
// kept it, not to a fresh (job, step) order that would put job 5 first.
TEST(GangPlan, MultiNodeOffsetsOutliveAClockThatDisagreesForAWhile) {
  const std::vector<Instance> all{across(7, 20, 0, 0), across(8, 5, 0, 0)};
  std::vector<const Instance*> first_only{&all[0]}, both{&all[0], &all[1]};
  const std::map<uint64_t, double> shares{{7, 0.3}, {8, 0.3}};
  const GangPlan first = plan_gangs(first_only, shares, 20 * kMs, true);
  const GangPlan aligned = plan_gangs(both, shares, 20 * kMs, true, first);
  ASSERT_EQ(aligned.windows.at(7).offset, 0);
  ASSERT_EQ(aligned.windows.at(8).offset, 6 * kMs);
  const GangPlan lost = plan_gangs(both, shares, 20 * kMs, false, aligned);
  EXPECT_TRUE(lost.windows.empty());  // one GPU here each: nothing to hold together
  EXPECT_EQ(lost.across_offsets, aligned.across_offsets);
  const GangPlan regained = plan_gangs(both, shares, 20 * kMs, true, lost);
  EXPECT_EQ(regained.windows.at(7).offset, 0);
  EXPECT_EQ(regained.windows.at(8).offset, 6 * kMs);
  // A step gone while the clock disagreed is forgotten with it.
  const GangPlan gone = plan_gangs(first_only, shares, 20 * kMs, false, aligned);
  EXPECT_EQ(gone.across_offsets.size(), 1u);
  EXPECT_TRUE(gone.across_offsets.contains({20, 0}));
}

TEST(GangPlan, WithoutClockAlignmentAMultiNodeStepIsAGangOnlyOfItsGpusHere) {
  const std::vector<Instance> all{across(1, 10, 0, 0), across(2, 11, 0, 0), across(3, 11, 0, 1)};
  std::vector<const Instance*> ptrs;
  for (const Instance& i : all)
    ptrs.push_back(&i);
  const GangPlan plan = plan_gangs(ptrs, {{1, 0.5}, {2, 0.5}, {3, 0.5}}, 20 * kMs, false);
  EXPECT_FALSE(plan.windows.contains(1));  // one GPU here: nothing to align with
  EXPECT_TRUE(plan.windows.contains(2));   // its two GPUs here still hold together
  EXPECT_EQ(plan.windows.at(2), plan.windows.at(3));
  EXPECT_FALSE(plan.windows.at(2).across_nodes);  // decided here alone: the node's own limit
  const GangPlan aligned = plan_gangs(ptrs, {{1, 0.5}, {2, 0.5}, {3, 0.5}}, 20 * kMs, true);
  EXPECT_TRUE(aligned.windows.contains(1));
  EXPECT_TRUE(aligned.windows.at(2).across_nodes);
}

}  // namespace
}  // namespace egpu::model
