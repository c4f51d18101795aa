// Connection exhaustion (issue 10, finding 3): a job user opens as many
// connections as it can, keeps one busy forever, or drives the agent out of
// descriptors. Root (slurmstepd's create and remove) and other users must still
// get through, and the agent must neither spin nor hoard descriptors.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uid_t kMallory = 4242;
constexpr uid_t kBob = 4343;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(milliseconds(ms));
}

// A non-blocking SEQPACKET connection; a full backlog is retried for a while.
int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  const auto deadline = Clock::now() + seconds(2);
  for (;;) {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    const int err = errno;
    close(fd);
    if (err != EAGAIN || Clock::now() > deadline) return -1;
    sleep_ms(5);
  }
}

// A forked process that becomes `uid`, opens up to `count` connections and
// sends a status request on each. It reports how many the agent answered (it
// closes the others) and holds every one open until killed.
struct Holder {
  pid_t pid = -1;
  int report_fd = -1;
  int answered = -1;
};

Holder spawn_holder(const std::string& socket, uid_t uid, int count, int settle_ms) {
  int report[2];
  if (pipe(report) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    if (!become(uid)) _exit(99);
    std::vector<int> fds;
    for (int i = 0; i < count; ++i) {
      const int fd = connect_unix(socket);
      if (fd < 0) break;
      fds.push_back(fd);
      auto bytes = protocol::encode_request(protocol::StatusRequest{0, 0}, 1);
      (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    // Every connection ends answered or closed; wait for all (bounded).
    std::vector<int> state(fds.size(), 0);  // 0 pending, 1 answered, 2 closed
    const auto deadline = Clock::now() + milliseconds(settle_ms);
    std::vector<uint8_t> buf(protocol::kMaxReplySize);
    for (;;) {
      std::vector<pollfd> pfds;
      std::vector<size_t> which;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (state[i] != 0) continue;
        pfds.push_back({fds[i], POLLIN, 0});
        which.push_back(i);
      }
      if (pfds.empty() || Clock::now() > deadline) break;
      if (poll(pfds.data(), pfds.size(), 100) <= 0) continue;
      for (size_t k = 0; k < pfds.size(); ++k) {
        if (pfds[k].revents == 0) continue;
        const ssize_t n = recv(pfds[k].fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n > 0) state[which[k]] = 1;
        if (n == 0 || (n < 0 && errno != EAGAIN)) state[which[k]] = 2;
      }
    }
    int answered = 0;
    for (int s : state)
      answered += s == 1 ? 1 : 0;
    (void)!write(report[1], &answered, sizeof answered);
    for (;;)
      pause();
  }
  close(report[1]);
  return Holder{pid, report[0], -1};
}

void collect(Holder& h, int wait_ms) {
  pollfd p{h.report_fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) == 1 && read(h.report_fd, &h.answered, sizeof h.answered) == 4) return;
  h.answered = -1;
}

void release(Holder& h) {
  if (h.pid > 0) {
    kill(h.pid, SIGKILL);
    waitpid(h.pid, nullptr, 0);
  }
  if (h.report_fd >= 0) close(h.report_fd);
  h = Holder{};
}

// Status as `uid` over a fresh connection; 0 when answered kOk.
int status_as(const std::string& socket, uid_t uid) {
  return run_as(uid, [&] {
    auto c = protocol::ControlClient::connect(socket);
    if (!c) return 10;
    auto st = c->call(protocol::StatusRequest{0, 0});
    if (!st) return 11;
    return st->status == ReplyStatus::kOk ? 0 : 12;
  });
}

// Retries `ok` for up to `limit`: the agent notices closed connections
// asynchronously, so a slot comes back soon after, not at once.
bool eventually(const std::function<bool()>& ok, seconds limit = seconds(15)) {
  const auto deadline = Clock::now() + limit;
  while (!ok()) {
    if (Clock::now() > deadline) return false;
    sleep_ms(100);
  }
  return true;
}

size_t open_fds(pid_t pid) {
  size_t n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = readdir(d))
      n += e->d_name[0] != '.' ? 1 : 0;
    closedir(d);
  }
  return n;
}

// The TCP connections `pid` holds whose local port is `port` (the metrics
// endpoint's accepted sockets, its listener not counted). Counted by socket,
// not by descriptor: the agent's other descriptors come and go (a control
// connection it closes goes to a closer thread, which may not have run yet).
size_t tcp_connections(pid_t pid, int port) {
  std::vector<std::string> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      char target[64] = {};
      const std::string link = dir + "/" + e->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      if (n > 0 && std::strncmp(target, "socket:[", 8) == 0)
        inodes.emplace_back(target + 8, static_cast<size_t>(n) - 9);
    }
    closedir(d);
  }
  char local_port[8];
  std::snprintf(local_port, sizeof local_port, ":%04X", port);
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  size_t held = 0;
  while (std::getline(tcp, line)) {
    std::istringstream row(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    row >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
        inode;
    if (!local.ends_with(local_port) || state == "0A") continue;  // 0A: listening
    held += std::count(inodes.begin(), inodes.end(), inode) > 0 ? 1 : 0;
  }
  return held;
}

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
    EXPECT_EQ(created->status, ReplyStatus::kOk) << created->text;
    auto removed = agent.call(protocol::RemoveRequest{job, 0, 0});
    ASSERT_TRUE(removed.ok()) << removed.error();
    EXPECT_EQ(removed->status, ReplyStatus::kOk) << removed->text;
  }
  std::unique_ptr<AgentProcess> agent_;
  std::vector<Holder> holders;
};

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
    auto direct = protocol::ControlClient::connect(root_socket, 3000);
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

// The metrics endpoint (loopback TCP, any local user can connect).
// `bind_lo`: bound to the loopback device first (SO_BINDTODEVICE, open to
// any user since Linux 5.7), which hides it from a careless sock_diag lookup.
int connect_tcp(int port, bool blocking, bool bind_lo = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (blocking ? 0 : SOCK_NONBLOCK), 0);
  if (bind_lo) (void)::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string scrape(int port) {
  const int fd = connect_tcp(port, true);
  if (fd < 0) return {};
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const char req[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  std::string body;
  if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req - 1)) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
      body.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return body;
}

TEST_F(ControlSocketExhaustion, MetricsConnectionsAreCapped) {
  constexpr int kPort = 19467;
  AgentProcess& agent = make_agent("MetricsAddress=127.0.0.1:" + std::to_string(kPort) + "\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_NE(scrape(kPort).find("egpu_agent_up 1"), std::string::npos);
  const size_t idle = open_fds(agent.pid());
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_tcp(kPort, false);
    if (fd >= 0) held.push_back(fd);
  }
  ASSERT_GT(held.size(), 100u);
  size_t most = 0;
  for (int i = 0; i < 30; ++i) {
    most = std::max(most, open_fds(agent.pid()));
    sleep_ms(100);
  }
  EXPECT_LT(most, idle + 32) << "idle " << idle << ", most " << most;
  // The control socket is untouched by it.
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok()) << st.error();
  for (int fd : held)
    close(fd);
  EXPECT_TRUE(eventually([&] { return scrape(kPort).find("egpu_agent_up 1") != std::string::npos; },
                         seconds(30)));
}

// One user reconnecting in a loop and never sending a request must not
// hold the endpoint against another user's scraper: past its share its
// connections are closed at accept, which also keeps the backlog moving.
// Half of them are bound to the loopback device, which a lookup on no
// device would not find.
TEST_F(ControlSocketExhaustion, OneUserCannotHoldTheMetricsEndpoint) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play other uids";
  constexpr int kPort = 19468;
  constexpr uid_t kScraper = 4343;
  AgentProcess& agent = make_agent("MetricsAddress=127.0.0.1:" + std::to_string(kPort) + "\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  const pid_t hoarder = fork();
  if (hoarder == 0) {
    if (!become(kMallory)) _exit(99);
    std::vector<int> fds;
    for (;;) {  // until killed: keep 64 connections, reopen what the agent closes
      for (size_t i = 0; i < fds.size();) {
        pollfd p{fds[i], POLLIN, 0};
        if (poll(&p, 1, 0) == 1) {
          close(fds[i]);
          fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      while (fds.size() < 64) {
        const int fd = connect_tcp(kPort, false, /*bind_lo=*/fds.size() % 2 == 0);
        if (fd < 0) break;
        fds.push_back(fd);
      }
      sleep_ms(5);
    }
  }
  // The hoarder holds what it can before anyone scrapes.
  EXPECT_TRUE(eventually([&] { return tcp_connections(agent.pid(), kPort) >= 2; }));
  sleep_ms(500);
  const int scraped = run_as(kScraper, [&] {
    // Each scrape may be retried (a SYN dropped from a full backlog costs a
    // second); without the per-user bound none gets through at all.
    for (int i = 0; i < 5; ++i) {
      const auto deadline = Clock::now() + seconds(30);
      while (scrape(kPort).find("egpu_agent_up 1") == std::string::npos) {
        if (Clock::now() > deadline) return 1;
      }
    }
    return 0;
  });
  // The fewest seen: one of its connections may be between accept and close.
  size_t held = SIZE_MAX;
  for (int i = 0; i < 5; ++i) {
    held = std::min(held, tcp_connections(agent.pid(), kPort));
    sleep_ms(10);
  }
  kill(hoarder, SIGKILL);
  waitpid(hoarder, nullptr, 0);
  EXPECT_EQ(scraped, 0) << "another user's scrape did not get through; the agent held " << held
                        << " connections";
  EXPECT_LE(held, 2u) << "one user holds more than its share";
}

// The lifetime bound, on a ControlServer of its own with short limits.
pid_t start_server(const std::string& path, const agent::ControlLimits& limits) {
  return start_control_server(
      path, limits, [](const agent::PeerCred&, std::span<const uint8_t> bytes) {
        return std::vector<agent::Outgoing>{{std::vector<uint8_t>(bytes.begin(), bytes.end()), {}}};
      });
}

// One ping and its echo; false once the server closed the connection.
bool ping(int fd) {
  const char msg[] = "ping";
  if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof msg)) return false;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return true;  // slow, not closed
  char buf[64];
  return recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0;
}

bool closed_within(int fd, seconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(milliseconds(limit).count())) != 1) return false;
  char buf[64];
  return recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0;
}

TEST(ControlServerLimits, ChattyUserIsClosedAtTheLifetimeBoundRootOnlyWhenIdle) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  char tmpl[] = "/tmp/egpu-control-limits-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  chmod(dir.c_str(), 0755);
  const std::string path = dir + "/agent.sock";
  agent::ControlLimits limits;
  limits.lifetime_s = 1;
  limits.idle_timeout_s = 3;
  const pid_t server = start_server(path, limits);
  ASSERT_GT(server, 0);
  const int root = connect_unix(path);
  ASSERT_GE(root, 0);
  const auto root_since = Clock::now();
  // The user pings four times a second, far inside the idle timeout.
  const pid_t user = fork();
  if (user == 0) {
    if (!become(kMallory)) _exit(99);
    const int fd = connect_unix(path);
    if (fd < 0 || !ping(fd)) _exit(2);
    const auto give_up = Clock::now() + seconds(12);
    while (Clock::now() < give_up) {
      sleep_ms(250);
      if (!ping(fd)) _exit(0);  // closed, as it must be
    }
    _exit(1);  // still open: the bound did not hold
  }
  // Root keeps talking the whole time and well past the bound: exempt.
  int status = 0;
  bool user_done = false;
  bool root_open = true;
  while (root_open && (!user_done || Clock::now() - root_since < milliseconds(3500))) {
    root_open = ping(root);
    if (!user_done && waitpid(user, &status, WNOHANG) == user) user_done = true;
    sleep_ms(250);
  }
  if (!user_done) waitpid(user, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "user client status " << status;
  EXPECT_TRUE(root_open) << "root was closed while active";
  // ...but not from the idle timeout.
  EXPECT_TRUE(closed_within(root, seconds(12)));
  close(root);
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);
  std::string cmd = "rm -rf '" + dir + "'";
  (void)!system(cmd.c_str());
}

// Bytes queued for reading on a SEQPACKET socket (all packets, not the next).
int queued(int fd) {
  int n = -1;
  return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

// Waits (a minute at most: the deadline only ends a failing case) until
// `fd` has at least `bytes` queued.
bool queued_at_least(int fd, int bytes) {
  const auto until = Clock::now() + seconds(60);
  while (queued(fd) < bytes) {
    if (Clock::now() > until) return false;
    sleep_ms(5);
  }
  return true;
}

struct EchoServer {
  explicit EchoServer(const agent::ControlLimits& limits) {
    char tmpl[] = "/tmp/egpu-control-limits-XXXXXX";
    dir = mkdtemp(tmpl);
    chmod(dir.c_str(), 0755);
    path = dir + "/agent.sock";
    pid = start_server(path, limits);
  }
  ~EchoServer() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    std::string cmd = "rm -rf '" + dir + "'";
    (void)!system(cmd.c_str());
  }
  std::string dir, path;
  pid_t pid = -1;
};

// A client that sends requests and reads no reply: the server answers the
// first and reads the next only once that reply is read. It queued every
// reply (up to its 2 MiB send buffer, then closed the connection and freed
// the slot), so a user looping that pinned the agent's memory without bound.
TEST(ControlServerLimits, ARequestWaitsUntilTheLastReplyIsRead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  EchoServer server{agent::ControlLimits{}};
  ASSERT_GT(server.pid, 0);
  const int rc = run_as(kMallory, [&] {
    const int fd = connect_unix(server.path);
    if (fd < 0) return 1;
    const char msg[] = "ping";  // 5 bytes, echoed
    for (int i = 0; i < 10; ++i)
      if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof msg)) return 1;
    if (!queued_at_least(fd, 5)) return 2;
    sleep_ms(300);
    if (queued(fd) != 5) return 3;  // more than one reply queued
    // Each reply read lets the next request through, to the last.
    char buf[64];
    for (int i = 0; i < 10; ++i) {
      if (!queued_at_least(fd, 5)) return 4;
      if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) != 5) return 5;
    }
    close(fd);
    return 0;
  });
  EXPECT_EQ(rc, 0) << "3: replies were queued that the client did not read";
}

// The server closes an idle connection whose reply was never read; the
// reply's memory stays pinned by the client's end, so the connection still
// counts against the user until the client reads it or lets go.
TEST(ControlServerLimits, AConnectionClosedWithItsReplyUnreadStillCounts) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  agent::ControlLimits limits;
  limits.per_uid = 1;
  limits.idle_timeout_s = 1;
  EchoServer server{limits};
  ASSERT_GT(server.pid, 0);
  const int rc = run_as(kMallory, [&] {
    const int first = connect_unix(server.path);
    const char msg[] = "ping";
    if (first < 0 || send(first, msg, sizeof msg, MSG_NOSIGNAL) != sizeof msg) return 1;
    if (!queued_at_least(first, 5)) return 2;
    // Past the idle timeout the server closes it, unread: shut for reading
    // (a send then fails), not let go (a minute at most).
    const auto closed_by = Clock::now() + seconds(60);
    while (send(first, msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) {
      if (Clock::now() > closed_by) return 6;
      sleep_ms(50);
    }
    const int second = connect_unix(server.path);
    if (second >= 0 && ping(second)) return 3;  // served: the unread one did not count
    if (second >= 0) close(second);
    char buf[64];
    if (recv(first, buf, sizeof buf, MSG_DONTWAIT) != 5) return 4;
    // Read: the slot is free again (within a sweep; a minute at most).
    const auto until = Clock::now() + seconds(60);
    for (;;) {
      const int third = connect_unix(server.path);
      const bool served = third >= 0 && ping(third) && !closed_within(third, seconds(0));
      if (third >= 0) close(third);
      if (served) break;
      if (Clock::now() > until) return 5;
      sleep_ms(50);
    }
    close(first);
    return 0;
  });
  EXPECT_EQ(rc, 0) << "3: a second connection was admitted past the user's one";
}

}  // namespace
}  // namespace egpu::test
