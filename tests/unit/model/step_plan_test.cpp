#include "core/model/step_plan.h"

#include <gtest/gtest.h>

namespace egpu::model {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
const StepIdentity kStep{77, 0, 1000, 1000};
const StepIdentity kBatch{77, protocol::kStepBatch, 1000, 1000};

TEST(StepPlan, NoEgpuAllocationMeansNoInstances) {
  auto r = plan_step_instances({}, kStep, {}, Mode::kBurst);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->empty());
}

// Options on a step without egpu did nothing, silently.
TEST(StepPlan, OptionsOnAStepWithoutEgpuAreNamedInAWarning) {
  EXPECT_EQ(options_without_egpu({}), "");
  const std::string said = options_without_egpu({Mode::kLend, 8ull << 30, std::nullopt});
  EXPECT_NE(said.find("--egpu-mode, --egpu-mem"), std::string::npos) << said;
  EXPECT_NE(said.find("without egpu units"), std::string::npos) << said;
  EXPECT_EQ(said.find("--egpu-slo"), std::string::npos) << said;
}

TEST(StepPlan, OneInstancePerGpuWithItsUnits) {
  auto r = plan_step_instances({"0,3", "100,20", "85000000000,17000000000"}, kStep, {}, Mode::kCap);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].gpu_index, 0u);
  EXPECT_EQ((*r)[0].units, 100u);
  EXPECT_EQ((*r)[1].gpu_index, 3u);
  EXPECT_EQ((*r)[1].units, 20u);
  EXPECT_EQ((*r)[1].mode, 1u);
  EXPECT_EQ((*r)[1].mem_quota, 0u);  // derived by the agent from the units
  EXPECT_EQ((*r)[1].job_id, 77u);
  EXPECT_EQ((*r)[1].uid, 1000u);
  // A step's instances end with its slurmstepd, which asks for them.
  EXPECT_EQ((*r)[1].flags, protocol::kCreateEndsWithCaller);
}

TEST(StepPlan, AStepOnSeveralNodesSaysSoButAnUmbrellaNever) {
  StepIdentity across = kStep;
  across.spans_nodes = true;
  auto r = plan_step_instances({"0", "40", "0"}, across, {}, Mode::kBurst);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)[0].flags, protocol::kCreateEndsWithCaller | protocol::kCreateSpansNodes);
  StepIdentity batch = kBatch;
  batch.spans_nodes = true;
  auto b = plan_step_instances({"0", "40", "0"}, batch, {}, Mode::kBurst);
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ((*b)[0].flags, protocol::kCreateUmbrella | protocol::kCreateEndsWithCaller);
}

TEST(StepPlan, BatchAndInteractiveStepsHoldTheJobAllocation) {
  auto r = plan_step_instances({"1", "60", "0"}, kBatch, {}, Mode::kBurst);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].flags, protocol::kCreateUmbrella | protocol::kCreateEndsWithCaller);
  EXPECT_TRUE(is_umbrella_step(protocol::kStepInteractive));
  EXPECT_FALSE(is_umbrella_step(protocol::kStepExtern));
  EXPECT_FALSE(is_umbrella_step(0));
}

TEST(StepPlan, OptionsOverrideModeAndMemoryWithinTheShare) {
  StepOptions opts;
  opts.mode = Mode::kCap;
  opts.mem_bytes = 10 * kGiB;
  auto r = plan_step_instances({"0", "30", std::to_string(24 * kGiB)}, kStep, opts, Mode::kBurst);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)[0].mem_quota, 10 * kGiB);
  EXPECT_EQ((*r)[0].mode, 1u);
  opts.mem_bytes = 25 * kGiB;
  auto too_much =
      plan_step_instances({"0", "30", std::to_string(24 * kGiB)}, kStep, opts, Mode::kBurst);
  ASSERT_FALSE(too_much.ok());
  EXPECT_NE(too_much.error().find("more than this step's share of GPU 0 (24.0 GiB for 30 units)"),
            std::string::npos)
      << too_much.error();
}

// A step on a node without the batch step: the job's allocation there comes
// from Slurm through EGPU_JOB_UNITS, so the agent can fit the job's other
// steps beside it; unknown ("0", absent) is the step's own units.
TEST(StepPlan, StepsCarryTheJobsAllocationWhenSlurmGaveIt) {
  auto r = plan_step_instances({"0,3", "40,20", "0,0", "100,0"}, kStep, {}, Mode::kBurst);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)[0].job_units, 100u);
  EXPECT_EQ((*r)[1].job_units, 20u);
  auto absent = plan_step_instances({"0", "40", "0"}, kStep, {}, Mode::kBurst);
  ASSERT_TRUE(absent.ok()) << absent.error();
  EXPECT_EQ((*absent)[0].job_units, 40u);
  // Never below the step's own units, even if the figure says so.
  auto less = plan_step_instances({"0", "40", "0", "30"}, kStep, {}, Mode::kBurst);
  ASSERT_TRUE(less.ok()) << less.error();
  EXPECT_EQ((*less)[0].job_units, 40u);
  auto mismatch = plan_step_instances({"0,3", "40,20", "0,0", "100"}, kStep, {}, Mode::kBurst);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error(), "EGPU_JOB_UNITS lists 1 GPUs, EGPU_GPU_INDICES 2 ('100', '0,3')");
  EXPECT_FALSE(plan_step_instances({"0", "40", "0", "101"}, kStep, {}, Mode::kBurst).ok());
  EXPECT_FALSE(plan_step_instances({"0", "40", "0", "x"}, kStep, {}, Mode::kBurst).ok());
}

TEST(StepPlan, MalformedEnvironmentIsAnError) {
  auto mismatch = plan_step_instances({"0,1", "30", ""}, kStep, {}, Mode::kBurst);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().find("different numbers of GPUs"), std::string::npos);
  EXPECT_FALSE(plan_step_instances({"0", "130", ""}, kStep, {}, Mode::kBurst).ok());
  EXPECT_FALSE(plan_step_instances({"x", "30", ""}, kStep, {}, Mode::kBurst).ok());
  EXPECT_FALSE(plan_step_instances({"0", "30,", ""}, kStep, {}, Mode::kBurst).ok());
  EXPECT_FALSE(plan_step_instances({"99", "30", ""}, kStep, {}, Mode::kBurst).ok());
}

TEST(StepPlan, UserOptionsAreValidatedWithClearErrors) {
  EXPECT_EQ(*parse_mode_option("cap"), Mode::kCap);
  auto fast = parse_mode_option("fast");
  ASSERT_FALSE(fast.ok());
  EXPECT_EQ(fast.error(), "--egpu-mode must be burst, cap or lend, got 'fast'");
  EXPECT_EQ(*parse_mem_option("16G", 80 * kGiB), 16 * kGiB);
  auto huge = parse_mem_option("1PB", 80 * kGiB);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().find("more than a GPU of this cluster has (80.0 GiB)"), std::string::npos)
      << huge.error();
  EXPECT_TRUE(parse_mem_option("1PB", 0).ok());  // unknown GPU size: checked on the node
  EXPECT_FALSE(parse_mem_option("0G", 0).ok());
  // A bare number (bytes? megabytes, as --mem reads it?) is refused, naming both.
  const auto bare = parse_mem_option("16000", 80 * kGiB);
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.error().find("has no unit: give one, e.g. 16000M or 16000G"), std::string::npos)
      << bare.error();
  EXPECT_FALSE(parse_mem_option("lots", 0).ok());
}

TEST(StepPlan, AnObjectiveNeedsBurstAndIsRefusedWithTheReasonOtherwise) {
  const auto objective = parse_slo_option("p99:40ms");
  ASSERT_TRUE(objective.ok()) << objective.error();
  ASSERT_TRUE(objective->has_value());
  EXPECT_FALSE(parse_slo_option("off")->has_value());
  auto bad = parse_slo_option("p101:5ms");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(),
            "--egpu-slo=p101:5ms: the percentile 'p101' is out of range: it must be above p0 and "
            "below p100");
  EXPECT_NE(parse_slo_option("p99:0ms").error().find(
                "--egpu-slo=p99:0ms: the latency target '0ms' is below 1ms"),
            std::string::npos);

  StepOptions with{std::nullopt, std::nullopt, *objective};
  EXPECT_TRUE(check_step_options(with, Mode::kBurst).ok());
  auto site_cap = check_step_options(with, Mode::kCap);
  ASSERT_FALSE(site_cap.ok());
  EXPECT_NE(site_cap.error().find("add --egpu-mode=burst"), std::string::npos) << site_cap.error();
  with.mode = Mode::kCap;
  EXPECT_NE(
      check_step_options(with, Mode::kBurst).error().find("--egpu-slo needs burst mode: cap never"),
      std::string::npos);
  with.mode = Mode::kLend;
  EXPECT_NE(check_step_options(with, Mode::kBurst).error().find("do not go together"),
            std::string::npos);
  // The plan refuses the same, naming it.
  auto plan = plan_step_instances({"0", "30", ""}, kStep, with, Mode::kBurst);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("--egpu-mode=lend"), std::string::npos);
  with.mode = Mode::kBurst;
  EXPECT_TRUE(plan_step_instances({"0", "30", ""}, kStep, with, Mode::kCap).ok());
}

}  // namespace
}  // namespace egpu::model
