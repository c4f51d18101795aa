// The socket layer's limits (lifetime, unread replies, each user's request
// budget), on a ControlServer of the test's own with short limits, in a
// child process.
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
#include "tests/security/control_socket_clients.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Each request answered with itself.
std::vector<agent::Outgoing> echo(const agent::PeerCred&, std::span<const uint8_t> bytes) {
  return std::vector<agent::Outgoing>{{std::vector<uint8_t>(bytes.begin(), bytes.end()), {}}};
}

// A server of the test's own in a directory of its own (`handler`: echo
// unless given), stopped and removed with the object.
struct EchoServer {
  explicit EchoServer(const agent::ControlLimits& limits,
                      agent::ControlServer::Handler handler = &echo) {
    char tmpl[] = "/tmp/egpu-control-limits-XXXXXX";
    dir = mkdtemp(tmpl);
    chmod(dir.c_str(), 0755);
    path = dir + "/agent.sock";
    pid = start_control_server(path, limits, std::move(handler));
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
  // The lifetime bound, on a server of its own with short limits.
  agent::ControlLimits limits;
  limits.lifetime_s = 1;
  limits.idle_timeout_s = 3;
  EchoServer server{limits};
  ASSERT_GT(server.pid, 0);
  const std::string& path = server.path;
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

// One request and its echo within `ms`: false when none came by then.
bool echoed_within(int fd, int ms) {
  const char msg[] = "ping";
  if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof msg)) return false;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return false;
  char buf[64];
  return recv(fd, buf, sizeof buf, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof msg);
}

// `n` echoes on `fd`, each within a minute (a bound for a broken server,
// not a measure): 0, or the number of the one not answered.
int unanswered_of(int fd, int n) {
  for (int i = 1; i <= n; ++i)
    if (!echoed_within(fd, 60'000)) return i;
  return 0;
}

// The same on one connection of `uid`'s.
int echoes_as(uid_t uid, const std::string& path, int n) {
  return run_as(uid, [&] {
    const int fd = connect_unix(path);
    if (fd < 0) return 1;
    const int unanswered = unanswered_of(fd, n);
    close(fd);
    return unanswered;
  });
}

// A user over its request budget waits; nobody else does. The agent used to
// serve requests as fast as one user's 128 connections could send them.
TEST(ControlServerLimits, AUserOverItsRequestBudgetWaitsAndNobodyElse) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play other uids";
  agent::ControlLimits limits;
  limits.request_budget = std::make_shared<RequestBudget>(10, 0);  // 10, then none ever
  EchoServer server{limits};
  ASSERT_GT(server.pid, 0);
  const int rc = run_as(kMallory, [&] {
    const int fd = connect_unix(server.path);
    if (fd < 0 || unanswered_of(fd, 10) != 0) return 2;
    // Over it: not answered, and not closed either.
    if (echoed_within(fd, 500)) return 3;
    const char msg[] = "ping";
    if (send(fd, msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof msg) return 4;
    close(fd);
    return 0;
  });
  EXPECT_EQ(rc, 0) << "3: a request past the user's budget was served; 4: its connection closed";
  // Another user has a budget of its own, and root has none.
  EXPECT_EQ(echoes_as(kBob, server.path, 10), 0);
  EXPECT_EQ(echoes_as(0, server.path, 50), 0);
}

// A user held by its budget is served again as it refills: every request
// is answered, none refused.
TEST(ControlServerLimits, AUserHeldByItsBudgetIsServedAsItRefills) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  agent::ControlLimits limits;
  limits.request_budget = std::make_shared<RequestBudget>(1, 200);
  EchoServer server{limits};
  ASSERT_GT(server.pid, 0);
  EXPECT_EQ(echoes_as(kMallory, server.path, 40), 0) << "that request was never answered";
}

// A user whose budget is spent can still close connections: a close is
// never held. One past the budget sat parked before, counted against the
// user's connections until it had a token (never, here), and the user's
// next connections were refused.
TEST(ControlServerLimits, AUserOutOfBudgetStillClosesItsConnections) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  agent::ControlLimits limits;
  limits.per_uid = 2;
  limits.request_budget = std::make_shared<RequestBudget>(3, 0);
  EchoServer server{limits};
  ASSERT_GT(server.pid, 0);
  const int rc = run_as(kMallory, [&] {
    const int first = connect_unix(server.path);
    if (first < 0 || unanswered_of(first, 3) != 0) return 1;
    // Spent. Connections that close at once, one slot left for them: each
    // must give it back.
    for (int i = 0; i < 20; ++i) {
      const int fd = connect_unix(server.path);
      if (fd < 0 || closed_within(fd, seconds(0))) return 2;
      close(fd);
      sleep_ms(20);
    }
    // The slot is free again: a connection is admitted, not closed at once.
    const auto until = Clock::now() + seconds(60);
    for (;;) {
      const int fd = connect_unix(server.path);
      const bool admitted = fd >= 0 && !closed_within(fd, seconds(1));
      if (fd >= 0) close(fd);
      if (admitted) break;
      if (Clock::now() > until) return 3;
    }
    close(first);
    return 0;
  });
  EXPECT_EQ(rc, 0) << "2, 3: a closed connection kept the user's slot";
}

// A request is charged by what its replies cost to build: one token, and
// one per bytes_per_token of reply.
TEST(ControlServerLimits, ALargeReplyCostsItsSize) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  agent::ControlLimits limits;
  limits.request_budget = std::make_shared<RequestBudget>(4, 0);
  limits.bytes_per_token = 4096;
  // "big" is answered with 10,000 bytes (3 tokens), anything else echoed.
  EchoServer server{
      limits, [](const agent::PeerCred&, std::span<const uint8_t> bytes) {
        const bool big = bytes.size() >= 3 && std::memcmp(bytes.data(), "big", 3) == 0;
        std::vector<uint8_t> reply = big ? std::vector<uint8_t>(10'000, 'x')
                                         : std::vector<uint8_t>(bytes.begin(), bytes.end());
        return std::vector<agent::Outgoing>{{std::move(reply), {}}};
      }};
  ASSERT_GT(server.pid, 0);
  const int rc = run_as(kMallory, [&] {
    const int fd = connect_unix(server.path);
    if (fd < 0) return 1;
    if (send(fd, "big", 3, MSG_NOSIGNAL) != 3) return 1;
    pollfd p{fd, POLLIN, 0};
    std::vector<char> buf(20'000);
    if (poll(&p, 1, 60'000) != 1 || recv(fd, buf.data(), buf.size(), 0) != 10'000) return 2;
    if (!echoed_within(fd, 60'000)) return 3;  // the fourth token
    if (echoed_within(fd, 500)) return 4;      // none left
    close(fd);
    return 0;
  });
  EXPECT_EQ(rc, 0) << "4: the large reply cost one token";
}

}  // namespace
}  // namespace egpu::test
