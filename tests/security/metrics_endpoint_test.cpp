// The metrics endpoint (loopback TCP, any local user can connect) under
// users who connect and hold connections: capped, and shared out by user.
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
#include <nlohmann/json.hpp>
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

// A process of `uid` that keeps 64 connections to the metrics endpoint
// until killed, reopening what the agent closes, half of them bound to the
// loopback device (which a lookup on no device would not find).
pid_t start_hoarder(uid_t uid, int port) {
  const pid_t hoarder = fork();
  if (hoarder != 0) return hoarder;
  if (!become(uid)) _exit(99);
  std::vector<int> fds;
  for (;;) {
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
      const int fd = connect_tcp(port, false, /*bind_lo=*/fds.size() % 2 == 0);
      if (fd < 0) break;
      fds.push_back(fd);
    }
    sleep_ms(5);
  }
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
  const pid_t hoarder = start_hoarder(kMallory, kPort);
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
  // Its share at some look while it keeps reconnecting: past it, its
  // connections are between accept and close, and a busy host's agent may
  // take a while to get to closing them (five looks in 50 ms once found 3).
  size_t held = SIZE_MAX;
  (void)eventually([&] {
    held = std::min(held, tcp_connections(agent.pid(), kPort));
    return held <= 2;
  });
  kill(hoarder, SIGKILL);
  waitpid(hoarder, nullptr, 0);
  EXPECT_EQ(scraped, 0) << "another user's scrape did not get through; the agent held " << held
                        << " connections";
  EXPECT_LE(held, 2u) << "one user holds more than its share";
}

// Users with enough uids between them (four users, or one with subordinate
// uids) held all 8 connections, two each, and root's scraper waited in the
// backlog until one timed out. Users together now hold at most 6.
TEST_F(ControlSocketExhaustion, UsersTogetherLeaveRootItsMetricsConnections) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play other uids";
  constexpr int kPort = 19471;
  AgentProcess& agent = make_agent("MetricsAddress=127.0.0.1:" + std::to_string(kPort) + "\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  std::vector<pid_t> hoarders;
  for (uid_t uid = 4501; uid <= 4504; ++uid)
    hoarders.push_back(start_hoarder(uid, kPort));
  EXPECT_TRUE(eventually([&] { return tcp_connections(agent.pid(), kPort) >= 6; }));
  // Held at some look (a connection past the bound lives from its accept to
  // its close, in one callback).
  size_t held = SIZE_MAX;
  (void)eventually([&] {
    held = std::min(held, tcp_connections(agent.pid(), kPort));
    return held <= 6;
  });
  const bool root_scraped = eventually(
      [&] { return scrape(kPort).find("egpu_agent_up 1") != std::string::npos; }, seconds(30));
  for (const pid_t h : hoarders) {
    kill(h, SIGKILL);
    waitpid(h, nullptr, 0);
  }
  EXPECT_LE(held, 6u) << "users hold root's reserve";
  EXPECT_TRUE(root_scraped);
}

// Any user can bind an unprivileged loopback port before the agent does (it
// restarts on upgrades and crashes): the agent must start anyway, serve its
// control socket, say in its status why it has no metrics, and take the
// port once it is free.
TEST_F(ControlSocketExhaustion, AUserHoldingTheMetricsPortDoesNotKeepTheAgentDown) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  constexpr int kPort = 19470;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t squatter = fork();
  if (squatter == 0) {
    close(ready[0]);
    if (!become(kMallory)) _exit(99);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;  // past an earlier run's connections in TIME_WAIT
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(kPort);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0)
      _exit(98);
    (void)!write(ready[1], "x", 1);
    pause();  // until killed
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  const bool holding = read(ready[0], &c, 1) == 1;
  close(ready[0]);
  if (!holding) {
    kill(squatter, SIGKILL);
    int status = 0;
    waitpid(squatter, &status, 0);
    FAIL() << "the squatter could not hold port " << kPort << " (exit "
           << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ")";
  }
  AgentProcess& agent = make_agent("MetricsAddress=127.0.0.1:" + std::to_string(kPort) + "\n");
  const bool started = agent.start();
  const auto metrics_state = [&]() -> nlohmann::json {
    auto st = agent.call(protocol::StatusRequest{0, 0});
    if (!st.ok() || st->status != ReplyStatus::kOk) return nullptr;
    const auto j = nlohmann::json::parse(st->text, nullptr, false);
    return j.is_discarded() ? nullptr : j["agent"].value("metrics", nlohmann::json());
  };
  nlohmann::json held_state;
  if (started) held_state = metrics_state();
  kill(squatter, SIGKILL);
  waitpid(squatter, nullptr, 0);
  ASSERT_TRUE(started) << agent.log();
  ASSERT_TRUE(held_state.is_object()) << held_state.dump();
  EXPECT_EQ(held_state["serving"], false) << held_state.dump();
  EXPECT_NE(held_state.value("error", "").find(std::to_string(kPort)), std::string::npos)
      << held_state.dump();
  EXPECT_NE(agent.log().find("tries again"), std::string::npos) << agent.log();
  // Freed, the port is the agent's at its next try.
  EXPECT_TRUE(eventually([&] { return scrape(kPort).find("egpu_agent_up 1") != std::string::npos; },
                         seconds(30)));
  EXPECT_EQ(metrics_state()["serving"], true);
}

}  // namespace
}  // namespace egpu::test
