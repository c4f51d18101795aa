// What the control socket's security tests do as clients of an agent:
// connect, hold many connections as another uid, ask for status as one; and
// the fixture that starts the agent they exhaust.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/protocol/control_client.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {

using Clock = std::chrono::steady_clock;

inline constexpr uid_t kMallory = 4242;
inline constexpr uid_t kBob = 4343;

void sleep_ms(int ms);

// A non-blocking SEQPACKET connection; a full backlog is retried for a while.
int connect_unix(const std::string& path);

// A forked process that becomes `uid`, opens up to `count` connections and
// sends a status request on each. It reports how many the agent answered (it
// closes the others) and holds every one open until killed.
struct Holder {
  pid_t pid = -1;
  int report_fd = -1;
  int answered = -1;
};
Holder spawn_holder(const std::string& socket, uid_t uid, int count, int settle_ms);
// Reads the holder's report (answered = -1 if none came within `wait_ms`).
void collect(Holder& h, int wait_ms);
// Kills and reaps the holder: its connections close.
void release(Holder& h);

// Status as `uid` over a fresh connection to `socket` itself (not the
// user's own socket beside it); 0 when answered kOk.
int status_as(const std::string& socket, uid_t uid);
// Status as `uid` the way its clients connect (its own socket first);
// 0 when answered kOk, 10 no connection, 11 no answer, 12 refused.
int status_as_client(const std::string& socket, uid_t uid);

// Retries `ok` for up to `limit`: the agent notices closed connections
// asynchronously, so a slot comes back soon after, not at once.
bool eventually(const std::function<bool()>& ok,
                std::chrono::seconds limit = std::chrono::seconds(15));

// The descriptors `pid` has open.
size_t open_fds(pid_t pid);

class ControlSocketExhaustion : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to play other uids";
  }
  void TearDown() override {
    for (auto& h : holders)
      release(h);
    if (HasFailure() && agent_) std::fprintf(stderr, "agent log:\n%s\n", agent_->log().c_str());
  }
  // The agent under test; `extra_config` as for AgentProcess.
  AgentProcess& make_agent(const std::string& extra_config = "") {
    agent_ = std::make_unique<AgentProcess>(extra_config);
    return *agent_;
  }
  void hold(const AgentProcess& agent, uid_t uid, int count, int settle_ms = 20000) {
    holders.push_back(spawn_holder(agent.socket(), uid, count, settle_ms));
    ASSERT_GT(holders.back().pid, 0);
  }
  // Holders as each uid in [first, end), `count` connections each: how many
  // the agent answered, all together.
  int hold_as_each(const AgentProcess& agent, uid_t first, uid_t end, int count) {
    for (uid_t uid = first; uid < end; ++uid)
      hold(agent, uid, count);
    int held = 0;
    for (auto& h : holders) {
      collect(h, 40000);
      EXPECT_GE(h.answered, 0);
      held += h.answered;
    }
    return held;
  }
  static void create_and_remove_as_root(const AgentProcess& agent, uint64_t job) {
    auto created = agent.call(create_request(job, 30, kBob));
    ASSERT_TRUE(created.ok()) << created.error();
    EXPECT_EQ(created->status, protocol::ReplyStatus::kOk) << created->text;
    auto removed = agent.call(protocol::RemoveRequest{job, 0, 0});
    ASSERT_TRUE(removed.ok()) << removed.error();
    EXPECT_EQ(removed->status, protocol::ReplyStatus::kOk) << removed->text;
  }
  std::unique_ptr<AgentProcess> agent_;
  std::vector<Holder> holders;
};

}  // namespace egpu::test
