// Hostile tenants, finding 5: a job's batch script and its steps share one
// memory quota per GPU. Before the fix the batch (umbrella) instance kept the
// whole job's quota while each step got its own, so an egpu:50 job could hold
// its memory twice and push a neighbour within its quota into a driver OOM.
// Exact: every figure is a byte count, no timing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/env/egpu_env_names.h"
#include "enforced_node.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uid_t kMallory = 4242;             // the job that tries to hold its memory twice
constexpr uid_t kAlice = 4243;               // an honest neighbour
constexpr uint64_t kUnit = 80 * kGiB / 100;  // bytes per unit, as the agent counts
constexpr uint64_t kJob = 50 * kUnit;        // an egpu:50 job's memory (~40 GiB)

// An instance's field in `egpuctl --json status` (null if not found).
nlohmann::json instance_field(EnforcedNode& node, uint64_t id, const std::string& key) {
  const CtlResult r = node.egpuctl({"--json", "status"});
  const auto status = nlohmann::json::parse(r.out, nullptr, false);
  if (status.is_discarded()) return nullptr;
  for (const auto& gpu : status.value("gpus", nlohmann::json::array())) {
    for (const auto& inst : gpu.value("instances", nlohmann::json::array())) {
      if (inst.value("id", uint64_t{0}) == id) return inst.value(key, nlohmann::json());
    }
  }
  return nullptr;
}

// Waits (a bound on progress, not a timing) until the agent sees `bytes` used.
bool wait_for_used(EnforcedNode& node, uint64_t id, uint64_t bytes) {
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end) {
    if (instance_field(node, id, "memory_used_bytes") == bytes) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

uint64_t create_step(EnforcedNode& node, uint64_t job, uint32_t step, uint32_t units, bool umbrella,
                     uid_t uid) {
  protocol::CreateRequest r{};
  r.job_id = job;
  r.step_id = step;
  r.uid = uid;
  r.gid = uid;
  r.units = units;
  r.job_units = units;
  r.flags = umbrella ? protocol::kCreateUmbrella : 0;
  auto reply = node.agent().call(r);
  EXPECT_TRUE(reply.ok() && reply->status == protocol::ReplyStatus::kOk)
      << (reply.ok() ? reply->text : reply.error());
  return reply.ok() ? reply->instance_id : 0;
}

nlohmann::json result_of(test_child::ChildProcess& p) {
  auto st = p.wait_for(120s);
  EXPECT_TRUE(st && st->success()) << p.stderr_text();
  return nlohmann::json::parse(p.stdout_text(), nullptr, false);
}

TEST(JobMemory, TheBatchScriptAndItsStepTogetherHoldNoMoreThanTheJob) {
  if (geteuid() != 0) GTEST_SKIP() << "runs its jobs as other users: needs root";
  // One simulated GPU of 80 GiB; the jobs run as unprivileged users.
  NodeOptions users;
  users.users = true;
  EnforcedNode node("job-mem", users);
  const std::string release = ::testing::TempDir() + "/job-mem-release";
  std::filesystem::remove(release);
  const std::map<std::string, std::string> hold = {{"PROBE_HOLD_UNTIL", release}};
  const std::string probe = memory_probe_path();

  // Job 5 has egpu:50 (40 GiB); its batch script takes 30 GiB and keeps it.
  const uint64_t batch = create_step(node, 5, protocol::kStepBatch, 50, true, kMallory);
  auto batch_env = hold;
  batch_env[EGPU_ENV_STEP_ID] = std::to_string(protocol::kStepBatch);
  auto batch_probe = node.start_program(5, {probe, "fill", std::to_string(30 * kGiB), "120000"}, 0,
                                        batch_env, kMallory);
  ASSERT_TRUE(wait_for_used(node, batch, 30 * kGiB)) << batch_probe->stderr_text();

  // Its step (srun inside the job: all 50 units) gets what is left, and the
  // batch script may not grow back into it. Both fill in 1 GiB pieces.
  const uint64_t step = create_step(node, 5, 0, 50, false, kMallory);
  EXPECT_EQ(instance_field(node, step, "memory_limit_bytes"), kJob - 30 * kGiB);
  EXPECT_EQ(instance_field(node, batch, "memory_limit_bytes"), 30 * kGiB);
  const uint64_t step_fill = (kJob - 30 * kGiB) / kGiB * kGiB;  // 9 GiB
  auto step_probe =
      node.start_program(5, {probe, "fill", std::to_string(kGiB), "120000"}, 0, hold, kMallory);
  ASSERT_TRUE(wait_for_used(node, step, step_fill)) << step_probe->stderr_text();

  // An honest neighbour with egpu:50 fills its whole quota (39 GiB in whole
  // GiB), not up to a driver OOM on a GPU the first job filled twice over
  // (before the fix the step had a full 40 GiB of its own: 30 + 39 + 11).
  create_step(node, 6, 0, 50, false, kAlice);
  auto neighbour = node.start_program(6, {probe, "fill", std::to_string(kGiB)}, 0, {}, kAlice);
  const auto n = result_of(*neighbour);
  EXPECT_EQ(n["allocated"], kJob / kGiB * kGiB) << n.dump();

  std::ofstream(release).put('\n');
  const auto b = result_of(*batch_probe);
  const auto s = result_of(*step_probe);
  EXPECT_EQ(b["allocated"], 30 * kGiB) << b.dump();
  EXPECT_EQ(s["allocated"], step_fill) << s.dump();
  EXPECT_LE(b["allocated"].get<uint64_t>() + s["allocated"].get<uint64_t>(), kJob);
}

TEST(JobMemory, AStepsExplicitQuotaThatTheBatchScriptLeavesNoRoomForIsRefusedClearly) {
  if (geteuid() != 0) GTEST_SKIP() << "runs its job as another user: needs root";
  NodeOptions users;
  users.users = true;
  EnforcedNode node("job-mem-explicit", users);
  const std::string release = ::testing::TempDir() + "/job-mem-explicit-release";
  std::filesystem::remove(release);
  const uint64_t batch = create_step(node, 5, protocol::kStepBatch, 50, true, kMallory);
  std::map<std::string, std::string> env = {
      {"PROBE_HOLD_UNTIL", release}, {EGPU_ENV_STEP_ID, std::to_string(protocol::kStepBatch)}};
  auto probe = node.start_program(
      5, {memory_probe_path(), "fill", std::to_string(30 * kGiB), "120000"}, 0, env, kMallory);
  ASSERT_TRUE(wait_for_used(node, batch, 30 * kGiB)) << probe->stderr_text();
  protocol::CreateRequest r{};
  r.job_id = 5;
  r.uid = kMallory;
  r.gid = kMallory;
  r.units = 50;
  r.job_units = 50;
  r.mem_quota = 20 * kGiB;  // --egpu-mem=20G: only ~10 GiB are left
  auto reply = node.agent().call(r);
  ASSERT_TRUE(reply.ok()) << reply.error();
  EXPECT_EQ(reply->status, protocol::ReplyStatus::kOverAllocation);
  EXPECT_NE(reply->text.find("batch or interactive step holds"), std::string::npos) << reply->text;
  std::ofstream(release).put('\n');
  EXPECT_EQ(result_of(*probe)["allocated"], 30 * kGiB);
}

}  // namespace
}  // namespace egpu::integration
