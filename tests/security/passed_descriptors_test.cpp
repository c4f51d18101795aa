// A hostile user passes the agent files whose last close blocks, one on
// each of many control connections: unix sockets, each with a TCP socket
// queued in it that is set to linger an hour on data its peer never reads
// (turning a passed socket's own linger off, as the agent did, does not
// reach the one inside it), on a kernel without SO_PASSRIGHTS
// (before 6.16: Debian 12 and 13 among them), played by the old-kernel
// fixture. The agent once closed such sockets on 16 disposal threads: the
// user held them all, and every socket it passed next stayed open in the
// agent until its descriptors ran out. Each must leave the agent at once
// for that user's disposal process, and the agent keep serving.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/control_client.h"
#include "nodeagent/disposal_processes.h"
#include "tests/agent/agent_fixture.h"
#include "tests/agent/lingering_socket.h"
#include "tests/security/agent_checks.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;

std::size_t open_descriptors(pid_t pid) {
  std::size_t n = 0;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d))
    n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// As `uid`: `count` connections, one after another, each passing a
// socket with a lingering one queued in it, and waiting until the agent has closed it. Reports how
// many went through on `ready`, then holds the sockets' peers open (so each
// close would block) until `hold` ends.
[[noreturn]] void pass_on_many_connections(const std::string& socket, int count, int ready,
                                           int hold, uid_t uid = kMallory) {
  if (!become(uid)) _exit(99);
  std::vector<LingeringSocket> held;
  int passed = 0;
  for (int i = 0; i < count; ++i) {
    held.push_back(lingering_socket());
    LingeringSocket& l = held.back();
    UniqueFd control(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    int nest[2];
    if (!l.socket.valid() || ::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, nest) != 0) break;
    UniqueFd outer(nest[0]);
    UniqueFd inner_sender(nest[1]);
    // The queue of the outer socket holds the last copy of the lingering
    // one, and the agent's copy of the outer socket is the last.
    if (!send_descriptor(inner_sender.get(), l.socket.get())) break;
    l.socket.reset();
    inner_sender.reset();
    if (::connect(control.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        send_last_copy(control.get(), std::move(outer)) != 0) {
      break;
    }
    // The agent closes it (within 20 s, so a failing agent fails the test):
    // the end, or a reset where its last copy went with the message unread.
    const timeval wait{20, 0};
    (void)::setsockopt(control.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char byte;
    const ssize_t got = ::recv(control.get(), &byte, 1, 0);
    if (got != 0 && !(got < 0 && errno == ECONNRESET)) break;
    ++passed;
  }
  (void)!write(ready, &passed, sizeof passed);
  char byte;
  (void)!read(hold, &byte, 1);
  _exit(0);
}

TEST(PassedDescriptorsOnAnOlderKernel, ManyLingeringSocketsLeaveTheAgentAtOnce) {
  if (geteuid() != 0) GTEST_SKIP() << "plays another user: needs root";
  constexpr int kConnections = 40;  // more than the 16 threads of before
  AgentProcess agent;
  agent.set_env("LD_PRELOAD", EGPU_OLD_KERNEL_FIXTURE);
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(kHonestJob, 50, kHonest))->status, ReplyStatus::kOk);
  const std::size_t before = open_descriptors(agent.pid());
  ASSERT_GT(before, 0u);

  int ready[2];
  int hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t mallory = fork();
  if (mallory == 0) {
    setpgid(0, 0);  // her senders with her, should she be killed
    close(ready[0]);
    close(hold[1]);
    pass_on_many_connections(agent.socket(), kConnections, ready[1], hold[0]);
  }
  close(ready[1]);
  close(hold[0]);
  int passed = 0;
  // Within ctest's 300 s, so that a failure shows the agent's log.
  if (!readable_within(ready[0], std::chrono::seconds(240))) {
    kill(-mallory, SIGKILL);
    waitpid(mallory, nullptr, 0);
    close(ready[0]);
    close(hold[1]);
    FAIL() << "mallory never finished: " << agent.log();
  }
  EXPECT_EQ(read(ready[0], &passed, sizeof passed), static_cast<ssize_t>(sizeof passed));
  EXPECT_EQ(passed, kConnections) << "the fixture did not take, or the agent refused them";

  // Every connection the agent closed left it: its descriptors are as before
  // (a disposal process's feed, a connection or two in flight aside).
  EXPECT_LE(open_descriptors(agent.pid()), before + 3) << agent.log();
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok()) << "the agent does not answer status";
  const auto p = nlohmann::json::parse(st->text)["agent"]["passed_descriptors"];
  EXPECT_GE(p["sockets_handed_on"].get<std::size_t>(), static_cast<std::size_t>(passed));
  EXPECT_EQ(p["sockets_held"].get<std::size_t>(), 0u);
  EXPECT_GE(p["disposal_processes"].get<std::size_t>(), 1u);
  EXPECT_TRUE(heartbeat_advances(agent));
  // The honest user attaches as ever.
  EXPECT_EQ(run_as(kHonest,
                   [&] {
                     auto att = attach(agent.socket(), kHonestJob, 0, 0);
                     return att && att->reply.status == ReplyStatus::kOk ? 0 : 1;
                   }),
            0);

  close(hold[1]);
  close(ready[0]);
  waitpid(mallory, nullptr, 0);
}

// A user with subordinate uids (/etc/subuid) passes one such socket from
// each of many uids that own no instance here. Each uid had disposal
// processes of its own, and a stuck one is never retired: one root process
// per uid, without bound (and a feed descriptor each in the agent). Uids that
// own no instance share one uid's processes, as they share its connections.
TEST(PassedDescriptorsOnAnOlderKernel, UidsThatOwnNoInstanceShareOneUsersDisposalProcesses) {
  if (geteuid() != 0) GTEST_SKIP() << "plays other users: needs root";
  constexpr uid_t kFirst = 200100;
  constexpr int kUids = 40;
  AgentProcess agent;
  agent.set_env("LD_PRELOAD", EGPU_OLD_KERNEL_FIXTURE);
  ASSERT_TRUE(agent.start()) << agent.log();
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  std::vector<pid_t> senders;
  int passed = 0;
  for (uid_t uid = kFirst; uid < kFirst + kUids; ++uid) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t sender = fork();
    if (sender == 0) {
      close(ready[0]);
      close(hold[1]);
      pass_on_many_connections(agent.socket(), 1, ready[1], hold[0], uid);
    }
    senders.push_back(sender);
    close(ready[1]);
    int one = 0;
    if (readable_within(ready[0], std::chrono::seconds(30)) &&
        read(ready[0], &one, sizeof one) == static_cast<ssize_t>(sizeof one)) {
      passed += one;
    }
    close(ready[0]);
  }
  EXPECT_EQ(passed, kUids) << "the fixture did not take, or the agent refused them";
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok()) << "the agent does not answer status";
  const auto p = nlohmann::json::parse(st->text)["agent"]["passed_descriptors"];
  EXPECT_GE(p["sockets_handed_on"].get<std::size_t>(), static_cast<std::size_t>(passed));
  EXPECT_LE(p["disposal_processes"].get<std::size_t>(),
            agent::DisposalProcesses::kMaxProcessesPerUser)
      << "one stuck disposal process per uid";
  EXPECT_TRUE(heartbeat_advances(agent));
  close(hold[1]);
  for (pid_t sender : senders)
    waitpid(sender, nullptr, 0);
}

}  // namespace
}  // namespace egpu::test
