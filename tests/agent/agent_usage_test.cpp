// What an instance achieved (device time charged, throttled time, memory
// peak) is kept in the agent's usage ledger: it outlives an agent restart,
// shows in `egpuctl show` and in a usage request (SPANK's checkpoints), and
// comes with the step's removal, which SPANK turns into the job's
// AdminComment record.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/accounting/step_usage.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "spank/step_checkpoints.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using namespace std::chrono_literals;
using protocol::ReplyStatus;
constexpr uid_t kOwner = 4242;
constexpr uint64_t kMemory = 300ull << 20;

// A process of `job` that works as a shim reports it: a thread always
// waiting for the GPU, 5 ms of device time every 10 ms, 300 MiB held.
pid_t start_worker(const AgentProcess& agent, uint64_t job) {
  return attached_process(agent.socket(), job, kOwner, [](const RawReply& att) {
    if (att.fds.size() < 3) return false;
    auto page = shm::map_fd(att.fds[1], sizeof(shm::InstancePage), shm::Access::kReadWrite);
    if (!page) return false;
    auto* me = &page->as<shm::InstancePage>()->procs[att.reply.proc_slot];
    me->mem_bytes.store(kMemory);
    me->busy.store(1);
    std::thread([me, mapping = std::make_shared<shm::Mapping>(std::move(*page))] {
      for (;;) {
        me->launches.fetch_add(1);
        me->device_ns.fetch_add(5'000'000);
        std::this_thread::sleep_for(10ms);
      }
    }).detach();
    return true;
  });
}

nlohmann::json usage_of(const AgentProcess& agent, uint64_t instance) {
  auto shown = agent.call(protocol::ShowRequest{instance});
  if (!shown || shown->status != ReplyStatus::kOk) return nullptr;
  return nlohmann::json::parse(shown->text)["usage"];
}

// Kills the worker however the test ends.
struct Worker {
  pid_t pid;
  ~Worker() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Waits (at most 30 s) for the instance to have been charged `seconds`. The
// worker wakes the agent (as a shim starting to wait does) now and then.
double wait_charged(const AgentProcess& agent, pid_t worker, uint64_t instance, double seconds) {
  double got = 0;
  for (int i = 0; i < 300; ++i) {
    kill(worker, SIGUSR1);
    const auto u = usage_of(agent, instance);
    got = u.is_object() ? u["device_s"].get<double>() : 0.0;
    if (got >= seconds) break;
    std::this_thread::sleep_for(100ms);
  }
  return got;
}

TEST(AgentUsage, OutlivesARestartAndComesWithTheRemoval) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 40, kOwner));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const uint64_t id = created->instance_id;
  Worker worker{start_worker(agent, 1)};
  ASSERT_GT(worker.pid, 0) << agent.log();

  const double before = wait_charged(agent, worker.pid, id, 0.3);
  ASSERT_GE(before, 0.3) << agent.log();
  auto u = usage_of(agent, id);
  EXPECT_EQ(u["memory_peak_bytes"].get<uint64_t>(), kMemory);
  EXPECT_EQ(u["agent_restarts"].get<uint32_t>(), 0u);
  // Only the agent may read the ledger.
  struct stat st {};
  ASSERT_EQ(stat((agent.dir() + "/run/usage-gpu0").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // A crash: the next agent goes on from the totals the last one left.
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  u = usage_of(agent, id);
  ASSERT_TRUE(u.is_object()) << agent.log();
  EXPECT_EQ(u["agent_restarts"].get<uint32_t>(), 1u);
  EXPECT_FALSE(u["partial"].get<bool>());
  EXPECT_GE(u["device_s"].get<double>(), before - 0.15);  // a fold is at most a heartbeat old
  const double after = wait_charged(agent, worker.pid, id, u["device_s"].get<double>() + 0.2);

  // A running step's usage so far (SPANK's checkpoints), without removing it.
  auto so_far = agent.call(protocol::UsageRequest{1, 0, 0});
  ASSERT_EQ(so_far->status, ReplyStatus::kOk) << so_far->text;
  auto checkpoint = accounting::usage_from_json(so_far->text);
  ASSERT_TRUE(checkpoint) << checkpoint.error() << ": " << so_far->text;
  ASSERT_EQ(checkpoint->size(), 1u);
  EXPECT_EQ(checkpoint->front().units, 40u);
  EXPECT_GE(checkpoint->front().device_s(), after - 0.15);
  EXPECT_EQ(checkpoint->front().totals.agent_restarts, 1u);
  EXPECT_EQ(checkpoint->front().totals.mem_peak_bytes, kMemory);
  EXPECT_EQ(agent.call(protocol::UsageRequest{1, 5, 0})->status, ReplyStatus::kNotFound);
  EXPECT_EQ(agent.call(protocol::UsageRequest{1, protocol::kAllSteps, 0})->status,
            ReplyStatus::kOk);

  auto removed = agent.call(protocol::RemoveRequest{1, 0, 0});
  ASSERT_EQ(removed->status, ReplyStatus::kOk) << removed->text;
  EXPECT_EQ(agent.call(protocol::UsageRequest{1, 0, 0})->status, ReplyStatus::kNotFound);
  auto usage = accounting::usage_from_json(removed->text);
  ASSERT_TRUE(usage) << usage.error() << ": " << removed->text;
  ASSERT_EQ(usage->size(), 1u);
  const accounting::StepUsage& final_usage = usage->front();
  EXPECT_EQ(final_usage.gpu, 0u);
  EXPECT_EQ(final_usage.units, 40u);
  EXPECT_GE(final_usage.device_s(), after);
  EXPECT_EQ(final_usage.totals.mem_peak_bytes, kMemory);
  EXPECT_EQ(final_usage.totals.agent_restarts, 1u);
  EXPECT_EQ(final_usage.totals.partial, 0u);
  EXPECT_GT(final_usage.elapsed_s(), 0.0);
  EXPECT_LE(final_usage.achieved_share(), 1.0);
  EXPECT_NE(agent.log().find("removed instance " + std::to_string(id)), std::string::npos);

  // The next instance in that slot starts from nothing.
  auto again = agent.call(create_request(2, 40, kOwner));
  ASSERT_EQ(again->status, ReplyStatus::kOk) << again->text;
  ASSERT_EQ(again->gpu_slot, created->gpu_slot);
  u = usage_of(agent, again->instance_id);
  EXPECT_EQ(u["device_s"].get<double>(), 0.0);
  EXPECT_EQ(u["agent_restarts"].get<uint32_t>(), 0u);
}

// A ledger the agent does not recognise (another layout, or junk) is
// started afresh: the instances it recovers say their totals are partial.
TEST(AgentUsage, ALostLedgerMakesRecoveredTotalsPartial) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 40, kOwner));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  ASSERT_TRUE(agent.stop());
  ASSERT_EQ(truncate((agent.dir() + "/run/usage-gpu0").c_str(), 16), 0);
  ASSERT_TRUE(agent.start()) << agent.log();
  const auto u = usage_of(agent, created->instance_id);
  ASSERT_TRUE(u.is_object()) << agent.log();
  EXPECT_TRUE(u["partial"].get<bool>());
  EXPECT_EQ(u["agent_restarts"].get<uint32_t>(), 1u);
  EXPECT_NE(agent.log().find("usage ledger"), std::string::npos) << agent.log();
}

// SPANK's checkpoints of a running step (spank/step_checkpoints.h) against a
// real agent. There is no scontrol on PATH here, so each write fails and its
// message carries the records it would have written; step_records.sh sees
// real ones reach sacct.
TEST(AgentUsage, CheckpointsCarryTheUsageSoFarUntilStopped) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(3, 40, kOwner));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  Worker worker{start_worker(agent, 3)};
  ASSERT_GT(worker.pid, 0) << agent.log();
  ASSERT_GE(wait_charged(agent, worker.pid, created->instance_id, 0.1), 0.1) << agent.log();

  const std::string no_tools = agent.dir() + "/empty-path";
  std::filesystem::create_directories(no_tools);
  const spank::CheckpointTarget target{3, 0, "3", "n7", agent.socket(), {"PATH=" + no_tools}};
  std::mutex mu;
  std::vector<std::string> logged;
  {
    spank::StepCheckpoints checkpoints(target, 50ms, 2'000, [&](const std::string& what) {
      std::lock_guard lock(mu);
      logged.push_back(what);
    });
    for (int i = 0; i < 300; ++i) {
      {
        std::lock_guard lock(mu);
        if (logged.size() >= 2) break;
      }
      std::this_thread::sleep_for(100ms);
    }
  }  // stopped: no checkpoint after this
  const size_t after_stop = logged.size();
  ASSERT_GE(after_stop, 2u) << agent.log();
  for (const std::string& line : logged) {
    EXPECT_NE(line.find("scontrol update of the job's AdminComment failed"), std::string::npos)
        << line;
    EXPECT_NE(line.find("egpu step=3.0 node=n7 gpu=0 units=40 "), std::string::npos) << line;
    EXPECT_TRUE(line.ends_with(" running=1")) << line;
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(logged.size(), after_stop);

  // One interval too long to come: stopping does not wait for it.
  {
    spank::StepCheckpoints idle(target, std::chrono::hours(1), 2'000, [](const std::string&) {});
  }
  // A step the agent no longer has is ending: nothing to write, no error.
  ASSERT_EQ(agent.call(protocol::RemoveRequest{3, 0, 0})->status, ReplyStatus::kOk);
  EXPECT_EQ(spank::checkpoint_step(target, 2'000), "");
  const spank::CheckpointTarget no_agent{3, 0, "3", "n7", agent.dir() + "/no-such.sock", {}};
  EXPECT_NE(spank::checkpoint_step(no_agent, 2'000).find("no node agent answers"),
            std::string::npos);
}

}  // namespace
}  // namespace egpu::test
