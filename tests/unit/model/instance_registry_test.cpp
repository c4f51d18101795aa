#include "core/model/instance_registry.h"

#include <gtest/gtest.h>

#include <vector>

namespace egpu::model {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uid_t kRoot = 0;
constexpr uid_t kAlice = 1001;
constexpr uid_t kBob = 1002;

CreateSpec spec(uint64_t job, uint32_t step, uint32_t gpu, uint32_t units, uint32_t job_units = 0,
                bool umbrella = false, uid_t uid = kAlice) {
  return CreateSpec{job,          step, gpu,      uid, uid, units, job_units ? job_units : units,
                    Mode::kBurst, 0,    umbrella, {},  0};
}

class Registry : public ::testing::Test {
 protected:
  InstanceRegistry reg{{80 * kGiB, 80 * kGiB}, 4};

  const Instance* create(const CreateSpec& s) {
    const Instance* out = nullptr;
    auto o = reg.create(kRoot, s, &out);
    EXPECT_TRUE(o.ok()) << o.message;
    return out;
  }
};

TEST_F(Registry, CreateAssignsSlotsQuotaAndShare) {
  auto* a = create(spec(1, 0, 0, 30));
  auto* b = create(spec(2, 0, 0, 70, 0, false, kBob));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->slot, b->slot);
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(a->mem_quota, 80 * kGiB / 100 * 30);
  EXPECT_DOUBLE_EQ(reg.effective_share(*a), 0.30);
  EXPECT_EQ(reg.allocated_units(0), 100u);
  EXPECT_EQ(reg.find(1, 0, 0), a);
}

TEST_F(Registry, OwnersAreThoseWithAnInstanceHere) {
  EXPECT_FALSE(reg.owns_any(kAlice));
  create(spec(1, 0, 0, 30));
  EXPECT_TRUE(reg.owns_any(kAlice));
  EXPECT_FALSE(reg.owns_any(kBob));
  std::vector<Instance> removed;
  ASSERT_TRUE(reg.remove(kRoot, 1, 0, &removed).ok());
  EXPECT_FALSE(reg.owns_any(kAlice));
}

// The targets FAA gets: effective shares, an umbrella whose steps hold its
// whole allocation keeps a sliver, and the sum never passes the GPU.
TEST_F(Registry, FaaTargetsAreEffectiveSharesScaledToTheGpu) {
  auto* batch = create(spec(5, protocol::kStepBatch, 0, 60, 60, true));
  auto* s0 = create(spec(5, 0, 0, 20, 60));
  auto* s1 = create(spec(5, 1, 0, 40, 60));
  auto* other = create(spec(6, 0, 0, 40, 0, false, kBob));
  ASSERT_TRUE(batch && s0 && s1 && other);
  const auto t = reg.faa_targets(0);
  ASSERT_EQ(t.size(), 4u);
  double sum = 0;
  for (const auto& [id, tm] : t)
    sum += tm.first;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(t.at(batch->id).first, 0.001 / 1.001, 1e-12);
  EXPECT_NEAR(t.at(s0->id).first, 0.2 / 1.001, 1e-12);
  EXPECT_NEAR(t.at(other->id).first, 0.4 / 1.001, 1e-12);
  EXPECT_TRUE(reg.faa_targets(1).empty());
  auto* alone = create(spec(7, 0, 1, 30));
  ASSERT_NE(alone, nullptr);
  EXPECT_DOUBLE_EQ(reg.faa_targets(1).at(alone->id).first, 0.30);  // below 1: unscaled
}

// Loans from the latency control's last period apply only where they still
// can: a lender gives within its share above one unit, an instance that no
// longer lends (or borrows) carries none, and borrowers get what was given.
TEST_F(Registry, FaaTargetsApplyLoansOnlyWhereTheyStillHold) {
  CreateSpec lend = spec(1, 0, 0, 30);
  lend.mode = Mode::kLend;
  auto* lender = create(lend);
  auto* critical = create(spec(2, 0, 0, 20));
  auto* guaranteed = create(spec(3, 0, 0, 50, 0, false, kBob));
  ASSERT_TRUE(lender && critical && guaranteed);
  ASSERT_TRUE(
      reg.set_objective(kRoot, critical->id, slo::LatencyObjective{99'000, 40'000'000}, nullptr)
          .ok());
  auto t = reg.faa_targets(0, {{lender->id, -25}, {critical->id, 25}});
  EXPECT_NEAR(t.at(lender->id).first, 0.05, 1e-12);
  EXPECT_NEAR(t.at(critical->id).first, 0.45, 1e-12);
  EXPECT_NEAR(t.at(guaranteed->id).first, 0.50, 1e-12);
  // A stale loan larger than the lender now has: it keeps its floor, and
  // the borrower gets only what was given.
  t = reg.faa_targets(0, {{lender->id, -40}, {critical->id, 40}});
  EXPECT_NEAR(t.at(lender->id).first, 0.01, 1e-12);
  EXPECT_NEAR(t.at(critical->id).first, 0.49, 1e-12);
  EXPECT_NEAR(t.at(guaranteed->id).first, 0.50, 1e-12);
  // A loan naming a guaranteed instance (it stopped lending) moves nothing.
  t = reg.faa_targets(0, {{guaranteed->id, -25}, {critical->id, 25}});
  EXPECT_NEAR(t.at(guaranteed->id).first, 0.50, 1e-12);
  EXPECT_NEAR(t.at(critical->id).first, 0.20, 1e-12);
  EXPECT_NEAR(t.at(lender->id).first, 0.30, 1e-12);
  // The lender's borrower left: what it lent comes back at once.
  const uint64_t gone = critical->id;  // `critical` points into the registry: gone with it
  std::vector<Instance> removed;
  ASSERT_TRUE(reg.remove(kRoot, 2, 0, &removed).ok());
  t = reg.faa_targets(0, {{lender->id, -25}, {gone, 25}});
  EXPECT_NEAR(t.at(lender->id).first, 0.30, 1e-12);
  double sum = 0;
  for (const auto& [id, tm] : t)
    sum += tm.first;
  EXPECT_LE(sum, 1.0 + 1e-12);
}

// A stale loan on a lender with nothing above its floor (resized to one
// unit since): nothing moves, and no 0/0 reaches FAA's targets.
TEST_F(Registry, AStaleLoanOnALenderWithNoRoomMovesNothing) {
  CreateSpec lend = spec(1, 0, 0, 1);
  lend.mode = Mode::kLend;
  auto* lender = create(lend);
  auto* critical = create(spec(2, 0, 0, 20));
  ASSERT_TRUE(lender && critical);
  ASSERT_TRUE(
      reg.set_objective(kRoot, critical->id, slo::LatencyObjective{99'000, 40'000'000}, nullptr)
          .ok());
  const auto t = reg.faa_targets(0, {{lender->id, -29}, {critical->id, 29}});
  EXPECT_DOUBLE_EQ(t.at(lender->id).first, 0.01);
  EXPECT_DOUBLE_EQ(t.at(critical->id).first, 0.20);
}

TEST_F(Registry, OnlyRootCreatesAndRemoves) {
  auto o = reg.create(kAlice, spec(1, 0, 0, 30), nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kDenied);
  EXPECT_EQ(InstanceRegistry::may_create(kAlice).status, ReplyStatus::kDenied);
  EXPECT_TRUE(InstanceRegistry::may_create(kRoot).ok());
  create(spec(1, 0, 0, 30));
  EXPECT_EQ(reg.remove(kAlice, 1, 0, nullptr).status, ReplyStatus::kDenied);
  std::vector<Instance> removed;
  EXPECT_TRUE(reg.remove(kRoot, 1, 0, &removed).ok());
  EXPECT_EQ(removed.size(), 1u);
  EXPECT_EQ(reg.remove(kRoot, 1, 0, nullptr).status, ReplyStatus::kNotFound);
}

// A job id is one user's on a node: a step of another uid's in it would
// share the job's pool and allocation. Refused, on any of the node's GPUs.
TEST_F(Registry, AJobIdIsOneUsers) {
  create(spec(7, 0, 0, 30));
  for (uint32_t gpu : {0u, 1u}) {
    auto o = reg.create(kRoot, spec(7, 1, gpu, 10, 0, false, kBob), nullptr);
    EXPECT_EQ(o.status, ReplyStatus::kDenied) << gpu;  // not kExists: SPANK's "made before"
    EXPECT_NE(o.message.find("job 7 has instances of uid 1001 here; step 7.1 of uid 1002"),
              std::string::npos)
        << o.message;
  }
  create(spec(7, 1, 1, 10));  // its own user's next step
  ASSERT_TRUE(reg.remove(kRoot, 7, 0, nullptr).ok());
  ASSERT_TRUE(reg.remove(kRoot, 7, 1, nullptr).ok());
  create(spec(7, 0, 0, 30, 0, false, kBob));  // gone: the id may be another's
}

// A step's create on its second GPU that fails further on is undone alone:
// the instance on its first GPU stays (the agent still runs it).
TEST_F(Registry, UndoingACreateLeavesTheStepsOtherGpus) {
  const uint64_t first = create(spec(1, 0, 0, 30))->id;
  const uint64_t second = create(spec(1, 0, 1, 30))->id;
  reg.erase(second);
  EXPECT_EQ(reg.find(second), nullptr);
  ASSERT_NE(reg.find(first), nullptr);
  EXPECT_EQ(reg.allocated_units(0), 30u);
  EXPECT_EQ(reg.allocated_units(1), 0u);
}

TEST_F(Registry, RefusesMoreThanTheGpuHas) {
  create(spec(1, 0, 0, 70));
  auto o = reg.create(kRoot, spec(2, 0, 0, 40), nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation);
  EXPECT_NE(o.message.find("30 units free"), std::string::npos) << o.message;
  EXPECT_EQ(reg.create(kRoot, spec(2, 0, 5, 10), nullptr).status, ReplyStatus::kNotFound);
  EXPECT_EQ(reg.create(kRoot, spec(1, 0, 0, 10), nullptr).status, ReplyStatus::kExists);
}

TEST_F(Registry, StepsShareTheJobAllocationWithTheUmbrella) {
  auto* batch = create(spec(5, protocol::kStepBatch, 0, 60, 60, true));
  EXPECT_DOUBLE_EQ(reg.effective_share(*batch), 0.60);
  auto* s0 = create(spec(5, 0, 0, 20, 60));
  auto* s1 = create(spec(5, 1, 0, 40, 60));
  EXPECT_DOUBLE_EQ(reg.effective_share(*s0), 0.20);
  EXPECT_DOUBLE_EQ(reg.effective_share(*s1), 0.40);
  EXPECT_DOUBLE_EQ(reg.effective_share(*batch), 0.0);
  EXPECT_EQ(reg.allocated_units(0), 60u);
  auto o = reg.create(kRoot, spec(5, 2, 0, 10, 60), nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation) << o.message;
  // A step claiming a larger job allocation cannot enlarge the umbrella's.
  o = reg.create(kRoot, spec(5, 3, 0, 10, 100), nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation) << o.message;
  EXPECT_EQ(reg.create(kRoot, spec(5, 4, 0, 10, 10, true), nullptr).status, ReplyStatus::kExists);
}

TEST_F(Registry, OwnerMovesShareBetweenStepsWithinTheAllocation) {
  create(spec(5, protocol::kStepBatch, 0, 60, 60, true));
  auto* s0 = create(spec(5, 0, 0, 20, 60));
  auto* s1 = create(spec(5, 1, 0, 40, 60));
  Instance updated;
  auto grow_first = reg.resize(kAlice, s0->id, 30, std::nullopt, &updated);
  EXPECT_EQ(grow_first.status, ReplyStatus::kOverAllocation);
  EXPECT_NE(grow_first.message.find("shrink another step first"), std::string::npos);
  EXPECT_TRUE(reg.resize(kAlice, s1->id, 30, std::nullopt, &updated).ok());
  EXPECT_TRUE(reg.resize(kAlice, s0->id, 30, std::nullopt, &updated).ok());
  EXPECT_DOUBLE_EQ(reg.effective_share(*s0), 0.30);
  EXPECT_DOUBLE_EQ(reg.effective_share(*s1), 0.30);
  EXPECT_EQ(reg.resize(kAlice, s0->id, 31, std::nullopt, nullptr).status,
            ReplyStatus::kOverAllocation);
}

TEST_F(Registry, OtherUsersCannotResizeOrAttach) {
  auto* a = create(spec(1, 0, 0, 30));
  EXPECT_EQ(reg.resize(kBob, a->id, 20, std::nullopt, nullptr).status, ReplyStatus::kDenied);
  EXPECT_EQ(reg.resize(kBob, a->id, 0, Mode::kCap, nullptr).status, ReplyStatus::kDenied);
  // The check the agent makes before it reads the job's pages for a resize.
  const Outcome bob = reg.may_change(kBob, a->id);
  EXPECT_EQ(bob.status, ReplyStatus::kDenied);
  EXPECT_NE(bob.message.find("belongs to another user"), std::string::npos) << bob.message;
  EXPECT_TRUE(reg.may_change(kAlice, a->id).ok());
  EXPECT_TRUE(reg.may_change(kRoot, a->id).ok());
  EXPECT_EQ(reg.may_change(kAlice, a->id + 100).status, ReplyStatus::kNotFound);
  EXPECT_EQ(reg.may_change(kAlice, a->id, /*force=*/true).status, ReplyStatus::kDenied);
  EXPECT_TRUE(reg.may_change(kRoot, a->id, /*force=*/true).ok());
  EXPECT_EQ(reg.authorize_attach(kBob, 1, 0, 0, nullptr).status, ReplyStatus::kDenied);
  const Instance* found = nullptr;
  EXPECT_TRUE(reg.authorize_attach(kAlice, 1, 0, 0, &found).ok());
  EXPECT_EQ(found, a);
  // Not even root: the page is Alice's to write (see the header).
  const Outcome root = reg.authorize_attach(kRoot, 1, 0, 0, nullptr);
  EXPECT_EQ(root.status, ReplyStatus::kDenied);
  EXPECT_NE(root.message.find("root's processes do not attach"), std::string::npos) << root.message;
  EXPECT_EQ(reg.authorize_attach(kAlice, 1, 0, 1, nullptr).status, ReplyStatus::kNotFound);
  EXPECT_FALSE(reg.may_see_details(kBob, *a));
  EXPECT_TRUE(reg.may_see_details(kAlice, *a));
}

TEST_F(Registry, OwnerCannotRaiseItsAllocation) {
  auto* a = create(spec(1, 0, 0, 30));
  auto o = reg.resize(kAlice, a->id, 40, std::nullopt, nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation) << o.message;
  auto* batch = create(spec(2, protocol::kStepBatch, 1, 50, 50, true));
  EXPECT_EQ(reg.resize(kAlice, batch->id, 60, std::nullopt, nullptr).status, ReplyStatus::kDenied);
  // Mode is the owner's to choose.
  Instance updated;
  EXPECT_TRUE(reg.resize(kAlice, a->id, 0, Mode::kCap, &updated).ok());
  EXPECT_EQ(updated.mode, Mode::kCap);
}

TEST_F(Registry, RootGrowsAJobPastWhatSlurmGrantedOnlyWhenForcedAndShrinkFirst) {
  auto* a = create(spec(1, 0, 0, 70));
  auto* b = create(spec(2, 0, 0, 30, 0, false, kBob));
  auto* c = create(spec(3, protocol::kStepBatch, 1, 40, 40, true));
  EXPECT_EQ(b->granted_units, 30u);
  EXPECT_EQ(reg.resize(kRoot, b->id, 70, std::nullopt, nullptr, 0, /*force=*/true).status,
            ReplyStatus::kOverAllocation);  // the GPU is full
  EXPECT_TRUE(reg.resize(kRoot, a->id, 30, std::nullopt, nullptr).ok());
  // Room on the GPU, but Slurm granted job 2 only 30 units.
  auto refused = reg.resize(kRoot, b->id, 70, std::nullopt, nullptr);
  EXPECT_EQ(refused.status, ReplyStatus::kOverAllocation);
  EXPECT_NE(refused.message.find("30 units on GPU 0 from Slurm"), std::string::npos)
      << refused.message;
  EXPECT_NE(refused.message.find("--force"), std::string::npos) << refused.message;
  // Only root may force; the owner stays within the allocation either way.
  EXPECT_EQ(reg.resize(kBob, b->id, 70, std::nullopt, nullptr, 0, true).status,
            ReplyStatus::kDenied);
  EXPECT_TRUE(reg.resize(kRoot, b->id, 70, std::nullopt, nullptr, 0, true).ok());
  EXPECT_DOUBLE_EQ(reg.effective_share(*a), 0.30);
  EXPECT_DOUBLE_EQ(reg.effective_share(*b), 0.70);
  EXPECT_EQ(reg.allocated_units(0), 100u);
  // The grant stays what Slurm said: growing further needs --force again.
  EXPECT_EQ(reg.find(b->id)->granted_units, 30u);
  EXPECT_TRUE(reg.resize(kRoot, b->id, 50, std::nullopt, nullptr).ok());  // shrinking is free
  EXPECT_EQ(reg.resize(kRoot, b->id, 60, std::nullopt, nullptr).status,
            ReplyStatus::kOverAllocation);
  // A job's allocation held by its batch step: the same rule.
  EXPECT_TRUE(reg.resize(kRoot, c->id, 20, std::nullopt, nullptr).ok());
  EXPECT_TRUE(reg.resize(kRoot, c->id, 40, std::nullopt, nullptr).ok());
  EXPECT_EQ(reg.resize(kRoot, c->id, 41, std::nullopt, nullptr).status,
            ReplyStatus::kOverAllocation);
  EXPECT_TRUE(reg.resize(kRoot, c->id, 41, std::nullopt, nullptr, 0, true).ok());
  // A step created after a forced grow does not make the forced size the
  // grant: growing back after a shrink needs --force again.
  ASSERT_TRUE(reg.resize(kRoot, c->id, 50, std::nullopt, nullptr, 0, true).ok());
  const Instance* step = create(spec(3, 0, 1, 10, 40));
  EXPECT_EQ(step->granted_units, 40u);
  EXPECT_EQ(reg.find(c->id)->granted_units, 40u);
  EXPECT_TRUE(reg.resize(kRoot, c->id, 40, std::nullopt, nullptr).ok());
  EXPECT_EQ(reg.resize(kRoot, c->id, 50, std::nullopt, nullptr).status,
            ReplyStatus::kOverAllocation);
}

TEST_F(Registry, SlotsRunOutAndAreReused) {
  for (uint32_t j = 1; j <= 4; ++j)
    create(spec(j, 0, 0, 10));
  EXPECT_EQ(reg.create(kRoot, spec(9, 0, 0, 10), nullptr).status, ReplyStatus::kFull);
  const uint32_t slot = reg.find(2, 0, 0)->slot;
  ASSERT_TRUE(reg.remove(kRoot, 2, protocol::kAllSteps, nullptr).ok());
  auto* again = create(spec(9, 0, 0, 10));
  EXPECT_EQ(again->slot, slot);
}

TEST_F(Registry, RestoreKeepsIdsUniqueAfterRestart) {
  Instance old;
  old.id = 41;
  old.job_id = 3;
  old.gpu = 1;
  old.slot = 2;
  old.units = 50;
  old.job_units = 50;
  EXPECT_TRUE(reg.restore(old).ok());
  EXPECT_EQ(reg.restore(old).status, ReplyStatus::kExists);
  auto* fresh = create(spec(4, 0, 1, 10));
  EXPECT_GT(fresh->id, 41u);
  EXPECT_NE(fresh->slot, 2u);
  EXPECT_EQ(reg.allocated_units(1), 60u);
}

TEST_F(Registry, MemoryQuotaExplicitAndBounded) {
  auto s = spec(1, 0, 0, 10);
  s.mem_quota = 4 * kGiB;
  EXPECT_EQ(create(s)->mem_quota, 4 * kGiB);
  auto big = spec(2, 0, 0, 10);
  big.mem_quota = 81 * kGiB;
  EXPECT_EQ(reg.create(kRoot, big, nullptr).status, ReplyStatus::kOverAllocation);
}

TEST_F(Registry, AnExplicitQuotaStaysWithinTheJobsUnits) {
  // 20 units of an 80 GiB GPU: 16 GiB at most, whatever --egpu-mem says.
  auto over = spec(1, 0, 0, 20);
  over.mem_quota = 16 * kGiB + 1;
  auto o = reg.create(kRoot, over, nullptr);
  EXPECT_EQ(o.status, ReplyStatus::kOverAllocation);
  EXPECT_NE(o.message.find("units of job 1"), std::string::npos) << o.message;
  auto at = spec(1, 0, 0, 20);
  at.mem_quota = 80 * kGiB / 100 * 20;
  EXPECT_EQ(create(at)->mem_quota, 80 * kGiB / 100 * 20);
  // A step of a job with more units may have more than its own units' part.
  auto step = spec(2, 1, 0, 10, 40);
  step.mem_quota = 30 * kGiB;
  EXPECT_EQ(create(step)->mem_quota, 30 * kGiB);
}

TEST_F(Registry, DerivedQuotaFollowsUnitsExplicitOneStays) {
  auto* a = create(spec(1, 0, 0, 70));
  auto s = spec(2, 0, 0, 30);
  s.mem_quota = 2 * kGiB;
  auto* b = create(s);
  ASSERT_TRUE(reg.resize(kRoot, a->id, 40, std::nullopt, nullptr).ok());
  ASSERT_TRUE(reg.resize(kRoot, b->id, 60, std::nullopt, nullptr, 0, /*force=*/true).ok());
  EXPECT_EQ(reg.find(a->id)->mem_quota, 80 * kGiB / 100 * 40);
  EXPECT_EQ(reg.find(b->id)->mem_quota, 2 * kGiB);
}

}  // namespace
}  // namespace egpu::model
