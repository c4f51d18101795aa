// Connection exhaustion (issue 10, finding 3): a job user opens as many
// connections as it can, keeps one busy forever, or drives the agent out of
// descriptors. Root (slurmstepd's create and remove) and other users must still
// get through, and the agent must neither spin nor hoard descriptors.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/protocol/codec.h"
#include "core/protocol/control_client.h"
#include "nodeagent/control_server.h"
#include "tests/agent/agent_fixture.h"
#include "tests/agent/control_server_child.h"
#include "tests/security/control_socket_clients.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
using std::chrono::milliseconds;
using std::chrono::seconds;

// utime + stime of `pid`, in clock ticks.
long cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(s.substr(s.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST_F(ControlSocketExhaustion, OneUserHoldingAllSheCanLocksOutNobodyElse) {
  AgentProcess& agent = make_agent();
  ASSERT_TRUE(agent.start()) << agent.log();
  // Both own an instance here: each has a share of connections of its own.
  ASSERT_EQ(agent.call(create_request(70, 30, kMallory))->status, ReplyStatus::kOk);
  ASSERT_EQ(agent.call(create_request(71, 30, kBob))->status, ReplyStatus::kOk);
  hold(agent, kMallory, 600);
  collect(holders[0], 40000);
  EXPECT_GT(holders[0].answered, 0);
  EXPECT_LT(holders[0].answered, 100) << "one uid holds a bounded number of connections";
  // While she holds them: slurmstepd (root) creates and removes a step, and
  // another user's egpuctl gets its status.
  create_and_remove_as_root(agent, 77);
  EXPECT_EQ(status_as(agent.socket(), kBob), 0);
  // Her slots are hers again once she lets them go.
  release(holders[0]);
  EXPECT_TRUE(eventually([&] { return status_as(agent.socket(), kMallory) == 0; }));
}

// A user with subordinate uids (/etc/subuid: a user namespace of her own
// maps them) has as many uids as she likes. Uids that own no instance here
// share one uid's connections: eight of them took all the users' before,
// and no shim of a job on the node could attach.
TEST_F(ControlSocketExhaustion, UidsThatOwnNoInstanceShareOneUsersConnections) {
  AgentProcess& agent = make_agent();
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(72, 30, kBob))->status, ReplyStatus::kOk);
  const int held = hold_as_each(agent, 200000, 200008, 64);
  EXPECT_GT(held, 0);
  EXPECT_LE(held, 64) << "uids without an instance held more than one uid's share";
  // While they hold them, the owner of an instance is served.
  EXPECT_EQ(status_as(agent.socket(), kBob), 0);
  EXPECT_NE(agent.log().find("uids that own no instance here hold"), std::string::npos)
      << agent.log();
}

// Status over a fresh connection from a process of `uid` whose groups are
// `gid` and `extra`; 0 when answered kOk.
int status_in_groups(const std::string& socket, uid_t uid, gid_t gid, std::vector<gid_t> extra) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(extra.size(), extra.data()) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
      _exit(99);
    auto c = protocol::ControlClient::connect_only(socket);
    if (!c) _exit(10);
    auto st = c->call(protocol::StatusRequest{0, 0});
    _exit(!st ? 11 : st->status == ReplyStatus::kOk ? 0 : 12);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A monitoring account runs egpuctl status on nodes where it has no job.
// With MonitorGroup its members count for themselves, by their group or a
// supplementary one; others without an instance still share one uid's
// connections, which uids of a user's own hold here.
TEST_F(ControlSocketExhaustion, MonitorGroupMembersCountForThemselves) {
  constexpr gid_t kMonitors = 4999;
  AgentProcess& agent = make_agent("MonitorGroup=" + std::to_string(kMonitors) + "\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  const int held = hold_as_each(agent, 200000, 200008, 64);
  ASSERT_GT(held, 0);
  EXPECT_LE(held, 64);
  EXPECT_NE(status_in_groups(agent.socket(), 200300, 200300, {}), 0)
      << "the strangers' connections were not all held: the test proves nothing";
  EXPECT_EQ(status_in_groups(agent.socket(), 200301, 200301, {kMonitors}), 0)
      << "a member by a supplementary group was refused";
  EXPECT_EQ(status_in_groups(agent.socket(), 200302, kMonitors, {}), 0)
      << "a member by its own group was refused";
}

// A connection counts where it was accepted for its whole life: a uid that
// gains an instance while its stranger's connections are open, then loses
// it, leaves every count as it found it. Closing them gave the strangers'
// slots back (another uid without an instance is served), and took none
// from its own (it still holds no more than one uid's share).
TEST_F(ControlSocketExhaustion, AUidGainingAndLosingAnInstanceKeepsEveryCount) {
  constexpr uid_t kNewcomer = 200100;
  constexpr uid_t kOtherStranger = 200101;
  AgentProcess& agent = make_agent();
  ASSERT_TRUE(agent.start()) << agent.log();
  hold(agent, kNewcomer, 64);
  collect(holders[0], 40000);
  ASSERT_GT(holders[0].answered, 0);
  // Now a tenant: counted as itself from here on, beside its strangers' connections.
  ASSERT_EQ(agent.call(create_request(80, 30, kNewcomer))->status, ReplyStatus::kOk);
  EXPECT_EQ(status_as(agent.socket(), kNewcomer), 0);
  hold(agent, kNewcomer, 600);
  collect(holders[1], 40000);
  EXPECT_GT(holders[1].answered, 0);
  EXPECT_LT(holders[1].answered, 100) << "its own connections are not bounded";
  // No longer a tenant, while both sets are open; then both close.
  ASSERT_EQ(agent.call(protocol::RemoveRequest{80, 0, 0})->status, ReplyStatus::kOk);
  release(holders[0]);
  release(holders[1]);
  holders.clear();
  EXPECT_TRUE(eventually([&] { return status_as(agent.socket(), kOtherStranger) == 0; }));
  // The strangers' share is whole again: one uid without an instance holds
  // up to it, and no further.
  hold(agent, kOtherStranger, 600);
  collect(holders[0], 40000);
  EXPECT_GE(holders[0].answered, 48) << "strangers' slots were lost";
  EXPECT_LT(holders[0].answered, 100) << "strangers' connections are not bounded";
  ASSERT_EQ(agent.call(create_request(81, 30, kNewcomer))->status, ReplyStatus::kOk);
  hold(agent, kNewcomer, 600);
  collect(holders[1], 40000);
  EXPECT_GE(holders[1].answered, 48) << "its own slots were lost";
  EXPECT_LT(holders[1].answered, 100) << "its count went below zero";
}

TEST_F(ControlSocketExhaustion, UsersTogetherCannotTakeRootsSlots) {
  AgentProcess& agent = make_agent();
  ASSERT_TRUE(agent.start()) << agent.log();
  // Each owns an instance (uids that own none share one uid's connections).
  for (uid_t uid = 5000; uid < 5012; ++uid)
    ASSERT_EQ(agent.call(create_request(uid, 5, uid))->status, ReplyStatus::kOk);
  const int held = hold_as_each(agent, 5000, 5012, 100);
  EXPECT_GT(held, 0);
  create_and_remove_as_root(agent, 78);
  // A root status too (the dump slurmstepd's epilog and admins read).
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(st->status, ReplyStatus::kOk);
}

// The public socket's backlog is everyone's: users looping connect and
// close can keep it full whatever the agent does after accept. Root has a
// socket of its own (mode 0600), whose backlog no user reaches: create and
// remove get through while users flood the public one.
TEST_F(ControlSocketExhaustion, RootHasASocketNoUserCanFill) {
  AgentProcess& agent = make_agent();
  ASSERT_TRUE(agent.start()) << agent.log();
  const std::string root_socket = protocol::root_socket_path(agent.socket());
  struct stat st {};
  ASSERT_EQ(stat(root_socket.c_str(), &st), 0) << root_socket;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  // A user cannot connect to it at all; root is served on it.
  EXPECT_EQ(run_as(kMallory, [&] { return connect_unix(root_socket) >= 0 ? 1 : 0; }), 0);
  {
    auto direct = protocol::ControlClient::connect(root_socket, 30'000);  // for a hung agent
    ASSERT_TRUE(direct) << direct.error();
    auto served = direct->call(protocol::StatusRequest{0, 0});
    ASSERT_TRUE(served) << served.error();
    EXPECT_EQ(served->status, ReplyStatus::kOk);
  }
  // Two flooders per core loop connect and close on the public socket.
  std::vector<pid_t> flooders;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const pid_t test = getppid();
      if (!become(kMallory)) _exit(99);
      // After become(): changing credentials clears the parent-death signal.
      (void)prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
      if (getppid() != test) _exit(0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, agent.socket().c_str(), sizeof addr.sun_path - 1);
      for (;;) {
        const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        close(fd);
      }
    }
    flooders.push_back(pid);
  }
  sleep_ms(500);
  for (uint64_t job = 900; job < 905; ++job)
    create_and_remove_as_root(agent, job);
  for (pid_t pid : flooders) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  // Without the root socket, root's calls go to the public one.
  ASSERT_EQ(unlink(root_socket.c_str()), 0);
  create_and_remove_as_root(agent, 910);
}

// A user who owns an instance gets a socket of her own, which no other user
// can connect to: one flooding the public socket cannot keep her shims from
// attaching (a shim that cannot attach runs outside its share, and is then
// killed as a process without the shim). Her clients go there first.
TEST_F(ControlSocketExhaustion, AUserWithAnInstanceHasASocketNoOtherUserCanFill) {
  AgentProcess& agent = make_agent();
  // Under a umask that keeps others out of what it makes: the users must
  // still reach their sockets' directory.
  const mode_t umask_before = umask(077);
  const bool started = agent.start();
  umask(umask_before);
  ASSERT_TRUE(started) << agent.log();
  const std::string own = protocol::user_socket_path(agent.socket(), kBob);
  struct stat st {};
  EXPECT_NE(stat(own.c_str(), &st), 0) << "a socket for a user with no instance";
  ASSERT_EQ(agent.call(create_request(81, 30, kBob))->status, ReplyStatus::kOk);
  // The agent binds it as root, then sets its mode and owner: the file is
  // there, root's, for a moment before it is Bob's (nobody can connect to it
  // before the agent listens).
  ASSERT_TRUE(eventually([&] { return stat(own.c_str(), &st) == 0 && st.st_uid == kBob; }))
      << own << " is not Bob's";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, kBob);
  // In a directory of root's no user can write: none can take or replace
  // another's socket there, whatever SocketPath's directory allows.
  struct stat dir {};
  ASSERT_EQ(lstat(protocol::user_socket_dir(agent.socket()).c_str(), &dir), 0);
  EXPECT_TRUE(S_ISDIR(dir.st_mode));
  EXPECT_EQ(dir.st_uid, 0u);
  EXPECT_EQ(dir.st_mode & 0777, 0755u);
  // Nobody else can connect to it.
  EXPECT_EQ(run_as(kMallory, [&] { return connect_unix(own) >= 0 ? 1 : 0; }), 0);
  // With the public socket out of reach (as a flood's full backlog would
  // keep it), Bob is served, through his own socket; Mallory is not.
  const std::string away = agent.socket() + ".away";
  ASSERT_EQ(rename(agent.socket().c_str(), away.c_str()), 0);
  const int bob = status_as_client(agent.socket(), kBob);
  const int mallory = run_as(
      kMallory, [&] { return protocol::ControlClient::connect(agent.socket(), 2000) ? 0 : 10; });
  ASSERT_EQ(rename(away.c_str(), agent.socket().c_str()), 0);
  EXPECT_EQ(bob, 0) << "10: no connection, 11: no answer, 12: refused";
  EXPECT_EQ(mallory, 10);
  // It goes with his last instance, and comes back with a restart that
  // recovers one.
  ASSERT_EQ(agent.call(create_request(82, 30, kBob))->status, ReplyStatus::kOk);
  agent.kill_hard();
  ASSERT_EQ(unlink(own.c_str()), 0);  // as if it had never been made
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_TRUE(eventually([&] { return stat(own.c_str(), &st) == 0; })) << agent.log();
  for (const uint64_t job : {81, 82}) {
    auto removed = agent.call(protocol::RemoveRequest{job, 0, 0});
    ASSERT_TRUE(removed.ok()) << removed.error();
  }
  EXPECT_TRUE(eventually([&] { return stat(own.c_str(), &st) != 0; }))
      << own << " is still there with no instance of its user's";
}

// A socket address holds 107 bytes of path; a deeper SocketPath (a test
// cluster in a long checkout path, a site's deep RuntimeDir) still gets its
// root and users' sockets beside it, and clients reach all three.
TEST_F(ControlSocketExhaustion, ASocketPathPastAnAddressesLengthStillServesEveryone) {
  AgentProcess& agent = make_agent();
  const std::string deep = agent.dir() + "/" + std::string(70, 'd') + "/" + std::string(40, 'e');
  ASSERT_TRUE(agent.set_socket_path(deep + "/agent.sock"));
  ASSERT_GT(agent.socket().size(), sizeof(sockaddr_un{}.sun_path));
  ASSERT_TRUE(agent.start()) << agent.log();
  struct stat st {};
  ASSERT_EQ(stat(protocol::root_socket_path(agent.socket()).c_str(), &st), 0) << agent.log();
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  ASSERT_EQ(agent.call(create_request(84, 30, kBob))->status, ReplyStatus::kOk);
  const std::string own = protocol::user_socket_path(agent.socket(), kBob);
  // Bound as root, then given to Bob: a look in between sees root's.
  EXPECT_TRUE(eventually([&] { return stat(own.c_str(), &st) == 0 && st.st_uid == kBob; }))
      << own << " never became Bob's (last seen uid " << st.st_uid << ")\n"
      << agent.log();
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  // Mallory through the public socket; Bob through his own, with the
  // public one out of his reach.
  EXPECT_EQ(status_as(agent.socket(), kMallory), 0);
  const std::string away = agent.socket() + ".away";
  ASSERT_EQ(rename(agent.socket().c_str(), away.c_str()), 0);
  const int bob = status_as_client(agent.socket(), kBob);
  ASSERT_EQ(rename(away.c_str(), agent.socket().c_str()), 0);
  EXPECT_EQ(bob, 0) << "10: no connection, 11: no answer, 12: refused";
}

// Where SocketPath's directory lets users make names (sticky, as /tmp), one
// could make the users' directory first and hold others' names in it. A
// directory that is not root's alone turns the users' sockets off (logged):
// everyone uses the public socket, as before there were any.
TEST_F(ControlSocketExhaustion, AUsersDirectoryMadeByAUserIsNotUsed) {
  AgentProcess& agent = make_agent();
  const std::string dir = protocol::user_socket_dir(agent.socket());
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0) << dir;
  ASSERT_EQ(chown(dir.c_str(), kMallory, kMallory), 0);
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(83, 30, kBob))->status, ReplyStatus::kOk);
  EXPECT_TRUE(eventually([&] {
    return agent.log().find("no user has a socket of its own") != std::string::npos;
  })) << agent.log();
  struct stat st {};
  EXPECT_NE(stat(protocol::user_socket_path(agent.socket(), kBob).c_str(), &st), 0);
  EXPECT_EQ(status_as(agent.socket(), kBob), 0);
}

TEST_F(ControlSocketExhaustion, OutOfDescriptorsTheAgentWaitsInsteadOfSpinning) {
  // The agent inherits a descriptor limit a little above what it needs idle.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  AgentProcess& agent = make_agent();
  const bool started = agent.start();
  setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_TRUE(started) << agent.log();
  ASSERT_LT(open_fds(agent.pid()), 48u) << "the agent needs more descriptors idle than assumed";
  for (uid_t uid = 6000; uid < 6004; ++uid)
    hold(agent, uid, 60, 3000);
  for (auto& h : holders)
    collect(h, 30000);
  // Out of descriptors with connections waiting: a loop that retries accept
  // at once burns a core and floods the log.
  const long before = cpu_ticks(agent.pid());
  const auto t0 = Clock::now();
  sleep_ms(3000);
  const long used = cpu_ticks(agent.pid()) - before;
  const double wall_ticks =
      std::chrono::duration<double>(Clock::now() - t0).count() * sysconf(_SC_CLK_TCK);
  EXPECT_LT(used, wall_ticks * 0.2) << "the agent spins while out of descriptors";
  const size_t warnings = count_of(agent.log(), "Too many open files");
  EXPECT_GE(warnings, 1u) << "the agent never ran out of descriptors: the test proves nothing";
  EXPECT_LT(warnings, 20u);
  // Once the holders let go, root is served again.
  for (auto& h : holders)
    release(h);
  EXPECT_TRUE(eventually([&] {
    auto r = agent.call(protocol::StatusRequest{0, 0});
    return r.ok() && r->status == ReplyStatus::kOk;
  }));
}

}  // namespace
}  // namespace egpu::test
