// A reply larger than the client's socket buffer (a root status of a node
// with many instances is sent in 64 KiB chunks): the chunks that find no
// room wait in the agent and go as the client reads, in order; before, the
// connection was closed at the first chunk that did not fit. What may wait
// is bounded, per connection and for users together.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nodeagent/control_server.h"
#include "tests/agent/agent_fixture.h"
#include "tests/agent/control_server_child.h"

namespace egpu::agent {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr size_t kChunks = 64;  // 4 MiB: more than any socket buffer here holds

// A ControlServer in a child process: "big" gets kChunks chunks, each
// filled with its index; anything else is echoed.
pid_t start_server(const std::string& path, const ControlLimits& limits) {
  return test::start_control_server(
      path, limits, [](const PeerCred&, std::span<const uint8_t> bytes) {
        std::vector<Outgoing> out;
        if (std::string(bytes.begin(), bytes.end()) == "big") {
          for (size_t i = 0; i < kChunks; ++i)
            out.push_back({std::vector<uint8_t>(kChunk, static_cast<uint8_t>(i)), {}});
        } else {
          out.push_back({std::vector<uint8_t>(bytes.begin(), bytes.end()), {}});
        }
        return out;
      });
}

int connect_to(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  return fd;
}

// The next packet within 10 s (a bound on a failing case): its bytes, or
// empty when the server closed or nothing came.
std::vector<uint8_t> next_packet(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 60'000) != 1) return {};
  std::vector<uint8_t> buf(kChunk + 1);
  const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

class WaitingReplies : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/egpu-waiting-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/agent.sock";
  }
  void TearDown() override {
    if (server_ > 0) {
      kill(server_, SIGKILL);
      waitpid(server_, nullptr, 0);
    }
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)!system(cmd.c_str());
  }
  std::string dir_;
  std::string path_;
  pid_t server_ = -1;
};

TEST_F(WaitingReplies, AReplyLargerThanTheSocketBufferArrivesWholeAndInOrder) {
  server_ = start_server(path_, ControlLimits{});
  ASSERT_GT(server_, 0);
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, "big", 3, MSG_NOSIGNAL), 3);
  // Not read for a while: the buffer fills, the rest waits in the server.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (size_t i = 0; i < kChunks; ++i) {
    const std::vector<uint8_t> chunk = next_packet(fd);
    ASSERT_EQ(chunk.size(), kChunk) << "chunk " << i << " of " << kChunks << " never came";
    ASSERT_EQ(chunk.front(), static_cast<uint8_t>(i)) << "out of order";
    ASSERT_EQ(chunk.back(), static_cast<uint8_t>(i));
  }
  // Then the connection serves its next request as usual.
  ASSERT_EQ(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
  const std::vector<uint8_t> echo = next_packet(fd);
  EXPECT_EQ(std::string(echo.begin(), echo.end()), "ping");
  close(fd);
}

TEST_F(WaitingReplies, AReplyPastWhatMayWaitClosesTheConnection) {
  if (geteuid() != 0) GTEST_SKIP() << "a user's connection stays until its reply is read";
  ControlLimits limits;
  limits.max_waiting_bytes = 4 * kChunk;  // far less than 4 MiB less a socket buffer
  server_ = start_server(path_, limits);
  ASSERT_GT(server_, 0);
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, "big", 3, MSG_NOSIGNAL), 3);
  // Unread until the server hangs up (a root connection is closed at once,
  // a user's only once its reply is read): the buffer fills meanwhile.
  pollfd hangup{fd, POLLRDHUP, 0};
  EXPECT_EQ(poll(&hangup, 1, 60'000), 1) << "the server kept the connection";
  size_t chunks = 0;
  while (chunks < kChunks && next_packet(fd).size() == kChunk)
    ++chunks;
  EXPECT_LT(chunks, kChunks) << "all of it came: more waited than allowed";
  // The server serves others.
  const int other = connect_to(path_);
  ASSERT_GE(other, 0);
  ASSERT_EQ(send(other, "ping", 4, MSG_NOSIGNAL), 4);
  const std::vector<uint8_t> echo = next_packet(other);
  EXPECT_EQ(std::string(echo.begin(), echo.end()), "ping");
  close(other);
  close(fd);
}

// One user's connections that do not read: together they may keep no more
// waiting than its share, so one uid cannot hold what every user may.
TEST_F(WaitingReplies, OneUsersWaitingRepliesAreBoundedTogether) {
  if (geteuid() != 0) GTEST_SKIP() << "plays another uid: needs root";
  ControlLimits limits;
  limits.per_uid_max_waiting_bytes = kChunks * kChunk - kChunk;  // one big reply's rest fits
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);                       // the user reaches the socket
  server_ = start_server(path_, limits);
  ASSERT_GT(server_, 0);
  const int rc = test::run_as(4242, [&] {
    const int first = connect_to(path_);
    const int second = connect_to(path_);
    if (first < 0 || second < 0) return 1;
    if (send(first, "big", 3, MSG_NOSIGNAL) != 3 || send(second, "big", 3, MSG_NOSIGNAL) != 3)
      return 1;
    // Unread until the server shuts one of them for reading (past its
    // uid's share): that end then refuses what the client sends. A bound
    // of a minute ends a failing case.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool cut = false;
    while (!cut && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (int fd : {first, second})
        cut = cut || (send(fd, "?", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EPIPE);
    }
    size_t got_first = 0;
    while (got_first < kChunks && next_packet(first).size() == kChunk)
      ++got_first;
    size_t got_second = 0;
    while (got_second < kChunks && next_packet(second).size() == kChunk)
      ++got_second;
    std::fprintf(stderr, "first %zu, second %zu of %zu chunks\n", got_first, got_second, kChunks);
    // One of them whole, the other cut short past its uid's share.
    return (got_first == kChunks) != (got_second == kChunks) ? 0 : 2;
  });
  EXPECT_EQ(rc, 0) << "1: no connection; 2: both whole (no bound per uid) or neither";
}

}  // namespace
}  // namespace egpu::agent
