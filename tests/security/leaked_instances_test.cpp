// Hostile tenants, finding 9: when the agent could not be reached at step
// end, SPANK's remove failed and the step's instance kept its units for good
// (later jobs on the GPU were refused). The instance now ends with the
// process that asked for it (slurmstepd, kCreateEndsWithCaller), watched by
// the agent, also across its restarts; egpuctl's instances do not.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/protocol/control_client.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
constexpr uid_t kUser = 4242;

// A short-lived root process (a slurmstepd) asks for job `job`'s instance and
// ends without removing it. Returns the instance id, 0 on failure.
uint64_t create_from_a_process_that_ends(const AgentProcess& agent, uint64_t job, uint32_t flags) {
  int out[2];
  if (pipe(out) != 0) return 0;
  const pid_t child = fork();
  if (child == 0) {
    uint64_t id = 0;
    auto req = create_request(job, 30, kUser);
    req.flags = flags;
    if (auto c = protocol::ControlClient::connect(agent.socket())) {
      if (auto r = c->call(req); r && r->status == ReplyStatus::kOk) id = r->instance_id;
    }
    (void)!write(out[1], &id, sizeof id);
    _exit(0);
  }
  uint64_t id = 0;
  if (read(out[0], &id, sizeof id) != sizeof id) id = 0;
  close(out[0]);
  close(out[1]);
  waitpid(child, nullptr, 0);
  return id;
}

int instances(const AgentProcess& agent) {
  auto st = agent.call(protocol::StatusRequest{0, 0});
  if (!st) return -1;
  const auto j = nlohmann::json::parse(st->text, nullptr, false);
  int n = 0;
  for (const auto& g : j["gpus"])
    n += static_cast<int>(g["instances"].size());
  return n;
}

bool wait_for_instances(const AgentProcess& agent, int want) {
  for (int i = 0; i < 1200; ++i) {  // 30 s
    if (instances(agent) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

TEST(LeakedInstances, AStepWhoseStepdEndsWithoutRemovingItIsFreed) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_NE(create_from_a_process_that_ends(agent, 1, protocol::kCreateEndsWithCaller), 0u)
      << agent.log();
  EXPECT_TRUE(wait_for_instances(agent, 0)) << agent.log();
  EXPECT_NE(agent.log().find("ended without removing it"), std::string::npos) << agent.log();
  // Its units are free again: a job that needs all of them gets them.
  auto all = agent.call(create_request(2, 100, kUser));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->status, ReplyStatus::kOk) << all->text;
}

TEST(LeakedInstances, AnInstanceMadeByAnAdminToolOutlivesTheTool) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_NE(create_from_a_process_that_ends(agent, 1, 0), 0u) << agent.log();
  // Its creator's end changes nothing: removing it is the admin's business.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(instances(agent), 1) << agent.log();
}

TEST(LeakedInstances, AStepThatEndedWhileTheAgentWasDownIsFreedWhenItComesBack) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  // One step whose stepd lives on (this test process), one whose stepd ends
  // while the agent is down (SPANK's remove would have failed).
  auto alive = create_request(1, 30, kUser);
  alive.flags = protocol::kCreateEndsWithCaller;
  ASSERT_EQ(agent.call(alive)->status, ReplyStatus::kOk);
  int go[2];
  int out[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(out), 0);
  const pid_t stepd = fork();
  if (stepd == 0) {
    uint64_t id = 0;
    auto req = create_request(2, 30, kUser);
    req.flags = protocol::kCreateEndsWithCaller;
    if (auto c = protocol::ControlClient::connect(agent.socket())) {
      if (auto r = c->call(req); r && r->status == ReplyStatus::kOk) id = r->instance_id;
    }
    (void)!write(out[1], &id, sizeof id);
    char c;
    (void)!read(go[0], &c, 1);  // ends when told
    _exit(0);
  }
  uint64_t id = 0;
  ASSERT_EQ(read(out[0], &id, sizeof id), static_cast<ssize_t>(sizeof id));
  ASSERT_NE(id, 0u);
  agent.kill_hard();
  ASSERT_EQ(write(go[1], "x", 1), 1);
  waitpid(stepd, nullptr, 0);
  for (int fd : {go[0], go[1], out[0], out[1]})
    close(fd);
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_TRUE(wait_for_instances(agent, 1)) << agent.log();
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok());
  EXPECT_NE(st->text.find("\"job\":1"), std::string::npos) << st->text;
  EXPECT_EQ(st->text.find("\"job\":2"), std::string::npos) << st->text;
}

}  // namespace
}  // namespace egpu::test
