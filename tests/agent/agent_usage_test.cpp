// What an instance achieved (device time charged, throttled time, memory
// peak) is kept in the agent's usage ledger: it outlives an agent restart,
// shows in `egpuctl show`, and comes with the step's removal, which SPANK
// turns into the job's AdminComment record.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/accounting/step_usage.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
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

  auto removed = agent.call(protocol::RemoveRequest{1, 0, 0});
  ASSERT_EQ(removed->status, ReplyStatus::kOk) << removed->text;
  auto usage = accounting::usage_from_removal_json(removed->text);
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

}  // namespace
}  // namespace egpu::test
