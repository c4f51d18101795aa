// One memory pool per job and GPU: the batch (umbrella) instance and the
// job's steps together never hold more than the job was given (issue 10, 5).
#include <gtest/gtest.h>

#include "core/model/instance_registry.h"

namespace egpu::model {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uid_t kRoot = 0;
constexpr uid_t kAlice = 1001;
constexpr uint64_t kGpu = 80 * kGiB;
constexpr uint64_t kUnit = kGpu / 100;  // bytes per unit

CreateSpec spec(uint64_t job, uint32_t step, uint32_t units, uint32_t job_units, bool umbrella,
                uint64_t mem_quota = 0, uint64_t umbrella_used = 0) {
  return CreateSpec{job,       step,         0,         kAlice,   kAlice, units,
                    job_units, Mode::kBurst, mem_quota, umbrella, {},     umbrella_used};
}

class JobMemory : public ::testing::Test {
 protected:
  InstanceRegistry reg{{kGpu}, 8};

  const Instance* create(const CreateSpec& s) {
    const Instance* out = nullptr;
    auto o = reg.create(kRoot, s, &out);
    EXPECT_TRUE(o.ok()) << o.message;
    return out;
  }
  uint64_t limit(uint64_t id) { return reg.memory_limit(*reg.find(id)); }
};

TEST_F(JobMemory, TheBatchScriptKeepsWhatItsStepsLeave) {
  const uint64_t batch = create(spec(1, protocol::kStepBatch, 50, 50, true))->id;
  EXPECT_EQ(limit(batch), 50 * kUnit);
  const uint64_t s0 = create(spec(1, 0, 20, 50, false))->id;
  EXPECT_EQ(limit(s0), 20 * kUnit);
  EXPECT_EQ(limit(batch), 30 * kUnit);
  const uint64_t s1 = create(spec(1, 1, 30, 50, false))->id;
  EXPECT_EQ(limit(batch), 0u);  // zero bytes, not "no limit"
  EXPECT_EQ(limit(s0) + limit(s1) + limit(batch), 50 * kUnit);
  ASSERT_TRUE(reg.remove(kRoot, 1, 0, nullptr).ok());
  EXPECT_EQ(limit(batch), 20 * kUnit);
  (void)s1;
}

TEST_F(JobMemory, AStepGetsOnlyWhatTheBatchScriptDoesNotHold) {
  create(spec(1, protocol::kStepBatch, 50, 50, true));
  // srun inside the job inherits all 50 units; the batch script holds 30 units' worth.
  const Instance* step = create(spec(1, 0, 50, 50, false, 0, 30 * kUnit));
  EXPECT_EQ(step->mem_quota, 20 * kUnit);
  EXPECT_EQ(limit(reg.umbrella_of(1, 0)->id), 30 * kUnit);
}

TEST_F(JobMemory, AnExplicitQuotaThatDoesNotFitIsRefusedNamingTheHolders) {
  create(spec(1, protocol::kStepBatch, 50, 50, true));
  auto o = reg.create(kRoot, spec(1, 0, 50, 50, false, 25 * kUnit, 30 * kUnit), nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation);
  EXPECT_NE(o.message.find("batch or interactive step holds " + std::to_string(30 * kUnit)),
            std::string::npos)
      << o.message;
  EXPECT_TRUE(reg.create(kRoot, spec(1, 0, 50, 50, false, 20 * kUnit, 30 * kUnit), nullptr).ok());
}

TEST_F(JobMemory, StepsWithExplicitQuotasCannotTogetherPassTheJobs) {
  // No umbrella (srun from a login node): the pool is the allocation's share.
  create(spec(7, 0, 25, 50, false, 30 * kUnit));
  auto o = reg.create(kRoot, spec(7, 1, 25, 50, false, 30 * kUnit), nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation) << o.message;
  EXPECT_EQ(create(spec(7, 1, 25, 50, false, 20 * kUnit))->mem_quota, 20 * kUnit);
}

TEST_F(JobMemory, TakingBackWhatAnUmbrellaAllocatedMeanwhile) {
  const uint64_t batch = create(spec(1, protocol::kStepBatch, 50, 50, true))->id;
  const uint64_t derived = create(spec(1, 0, 20, 50, false))->id;
  EXPECT_TRUE(reg.take_step_memory(derived, 5 * kUnit));
  EXPECT_EQ(limit(derived), 15 * kUnit);
  EXPECT_EQ(limit(batch), 35 * kUnit);
  const uint64_t fixed = create(spec(1, 1, 10, 50, false, 8 * kUnit))->id;
  EXPECT_FALSE(reg.take_step_memory(fixed, kUnit));
  EXPECT_EQ(limit(fixed), 8 * kUnit);
  EXPECT_FALSE(reg.take_step_memory(batch, kUnit));
}

TEST_F(JobMemory, AResizedStepStaysWithinThePool) {
  create(spec(1, protocol::kStepBatch, 50, 50, true));
  const uint64_t s0 = create(spec(1, 0, 10, 50, false))->id;
  // The owner grows the step to 40 units while the batch script holds 25 units' worth.
  ASSERT_TRUE(reg.resize(kAlice, s0, 40, std::nullopt, nullptr, 25 * kUnit).ok());
  EXPECT_EQ(limit(s0), 25 * kUnit);
  ASSERT_TRUE(reg.resize(kAlice, s0, 10, std::nullopt, nullptr, 25 * kUnit).ok());
  EXPECT_EQ(limit(s0), 10 * kUnit);
}

TEST(JobMemoryUnknownGpuSize, NothingIsLimitedUnlessAsked) {
  InstanceRegistry reg{{0}, 8};
  const Instance* batch = nullptr;
  ASSERT_TRUE(reg.create(kRoot, spec(1, protocol::kStepBatch, 50, 50, true), &batch).ok());
  EXPECT_EQ(reg.memory_limit(*batch), kNoMemoryLimit);
  const Instance* step = nullptr;
  ASSERT_TRUE(reg.create(kRoot, spec(1, 0, 20, 50, false, 4 * kGiB), &step).ok());
  EXPECT_EQ(reg.memory_limit(*step), 4 * kGiB);
  EXPECT_EQ(reg.memory_limit(*reg.find(batch->id)), kNoMemoryLimit);
}

}  // namespace
}  // namespace egpu::model
