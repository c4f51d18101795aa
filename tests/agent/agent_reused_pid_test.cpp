// An attach names its process by the socket it comes on, not by a pid a
// process could leave behind: a job user connects, hands the socket to a
// child and exits, and by the time the child attaches somebody else's
// process has the pid. The slot must not live as long as that process.
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/protocol/control_client.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using namespace std::chrono_literals;
using protocol::ReplyStatus;
constexpr uid_t kOwner = 4242;

// A process that takes `pid` (clone3 with set_tid: root only) and sleeps
// until killed; -1 with errno set when the pid could not be had.
pid_t occupy_pid(pid_t pid) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uintptr_t>(&pid);
  args.set_tid_size = 1;
  const long r = ::syscall(SYS_clone3, &args, sizeof args);
  if (r == 0) {
    // Raw system calls only: glibc's view of this process is its parent's.
    for (;;)
      ::syscall(SYS_pause);
  }
  return static_cast<pid_t>(r);
}

class ReusedPid : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (to switch users and to reuse a pid)";
    ASSERT_TRUE(agent.start()) << agent.log();
  }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  AgentProcess agent;
};

TEST_F(ReusedPid, AnAttachFromAProcessWhosePidWasReusedHoldsNoSlot) {
  auto created = agent.call(create_request(1, 50, kOwner));
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const uint64_t instance = created->instance_id;

  int go[2];
  int result[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(result), 0);
  const pid_t connector = fork();
  ASSERT_GE(connector, 0);
  if (connector == 0) {
    close(go[1]);
    close(result[0]);
    if (!become(kOwner)) _exit(10);
    auto client = protocol::ControlClient::connect(agent.socket(), 5000);
    if (!client) _exit(11);
    const pid_t sender = fork();
    if (sender < 0) _exit(12);
    if (sender == 0) {
      // Attaches once told the connector's pid belongs to somebody else;
      // the test closing its end instead means give up.
      char c = 0;
      if (read(go[0], &c, 1) != 1) _exit(13);
      auto r = client->call_with_fds(protocol::AttachRequest{1, 0, 0});
      const uint8_t status = r ? static_cast<uint8_t>(r->reply.status) : 255;
      (void)!write(result[1], &status, 1);
      _exit(0);  // its descriptors go with it; the agent watches the connector's process
    }
    _exit(0);  // the connecting process goes; its socket lives on in the sender
  }
  close(go[0]);
  close(result[1]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(connector, &wstatus, 0), connector);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "connector: " << wstatus;

  const pid_t reuser = occupy_pid(connector);
  if (reuser < 0) {
    const int err = errno;
    close(go[1]);  // the sender gives up
    close(result[0]);
    if (err == EEXIST) GTEST_SKIP() << "pid " << connector << " was taken before the test could";
    FAIL() << "clone3 with set_tid " << connector << ": " << std::strerror(err);
  }
  ASSERT_EQ(reuser, connector);
  const char c = 1;
  ASSERT_EQ(write(go[1], &c, 1), 1);
  ASSERT_TRUE(readable_within(result[0], 60s)) << "the sender never reported";
  uint8_t status = 255;
  ASSERT_EQ(read(result[0], &status, 1), 1);
  close(go[1]);
  close(result[0]);

  // Refused, or granted to a process already gone and reclaimed at once:
  // either way no slot of the instance is held for the pid's new owner,
  // which lives on.
  nlohmann::json shown;
  bool free = false;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       !free && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
    auto r = agent.call(protocol::ShowRequest{instance});
    ASSERT_TRUE(r.ok());
    shown = nlohmann::json::parse(r->text);
    free = shown["processes"] == 0;
  }
  EXPECT_TRUE(free) << "attach status " << int{status} << ", pid " << connector
                    << " (now another process) still holds a slot: " << shown.dump();
  EXPECT_EQ(kill(reuser, 0), 0) << "the pid's new owner must still be alive for the check";
  kill(reuser, SIGKILL);
  waitpid(reuser, nullptr, 0);
}

}  // namespace
}  // namespace egpu::test
