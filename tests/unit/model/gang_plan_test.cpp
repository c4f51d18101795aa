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
      plan_gangs(ptrs, {{1, 0.5}, {2, 0.4}, {3, 0.5}, {4, 0.3}, {5, 0.3}}, 20 * kMs);
  ASSERT_EQ(plan.windows.size(), 4u);  // instance 3 is a step on one GPU
  EXPECT_FALSE(plan.windows.contains(3));
  // Job 10: 40% of the period on GPUs 0 and 1, first.
  EXPECT_EQ(plan.windows.at(1), (faa::GangWindow{0, 20 * kMs, 0, 8 * kMs}));
  EXPECT_EQ(plan.windows.at(2), plan.windows.at(1));
  // Job 12 shares GPU 1 with job 10: it goes after it.
  EXPECT_EQ(plan.windows.at(4), (faa::GangWindow{0, 20 * kMs, 8 * kMs, 6 * kMs}));
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
  const GangPlan plan = plan_gangs(ptrs, {{1, 0.5}, {2, 0.5}, {3, 0.5}}, 20 * kMs);
  EXPECT_TRUE(plan.windows.empty());  // 4 has no share: no window for 3 either
}

TEST(GangPlan, AGangThatDoesNotFitIsReported) {
  // Two gangs on GPUs 0 and 1 at 60% each cannot both have windows.
  const std::vector<Instance> all{inst(1, 10, 0, 0), inst(2, 10, 0, 1), inst(3, 11, 0, 0),
                                  inst(4, 11, 0, 1)};
  std::vector<const Instance*> ptrs;
  for (const Instance& i : all)
    ptrs.push_back(&i);
  const GangPlan plan = plan_gangs(ptrs, {{1, 0.6}, {2, 0.6}, {3, 0.4}, {4, 0.6}}, 20 * kMs);
  EXPECT_EQ(plan.windows.size(), 4u);  // 60% + 40% fit
  const GangPlan over = plan_gangs(ptrs, {{1, 0.6}, {2, 0.6}, {3, 0.6}, {4, 0.6}}, 20 * kMs);
  EXPECT_EQ(over.windows.size(), 2u);
  ASSERT_EQ(over.unplaced.size(), 1u);
  EXPECT_EQ(over.unplaced[0], (std::pair<uint64_t, uint32_t>{11, 0}));
}

}  // namespace
}  // namespace egpu::model
