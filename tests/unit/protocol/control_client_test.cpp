// ControlClient against scripted agents: what egpuctl and the SPANK plugin
// meet when the agent is absent, stuck, slow, hostile or simply chatty. Every
// call ends by its deadline with a clear error, or with the whole reply.
#include "core/protocol/control_client.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/util/clock.h"
#include "tests/unit/protocol/scripted_agent.h"

namespace egpu::protocol {
namespace {

using std::chrono::milliseconds;
using test::read_request;
using test::ScriptedAgent;
using test::send_with_fds;
using test::wait_for_close;

const Request kStatus = StatusRequest{0, 0};

int64_t ms_since(int64_t start_ns) {
  return (monotonic_ns() - start_ns) / 1'000'000;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A SEQPACKET socket bound to a fresh path under /tmp, removed with it.
struct BoundSocket {
  std::string path;
  sockaddr_un addr{};
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  explicit BoundSocket(const std::string& name)
      : path("/tmp/egpu-client-" + name + "-" + std::to_string(getpid()) + ".sock") {
    unlink(path.c_str());
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(fd, sa(), sizeof addr), 0);
  }
  ~BoundSocket() {
    if (fd >= 0) close(fd);
    unlink(path.c_str());
  }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
};

Reply chunk(const std::string& text, bool more) {
  Reply r;
  r.instance_id = 9;
  r.flags = more ? kReplyMore : 0;
  r.text = text;
  return r;
}

TEST(ControlClient, PathWithNoListenerIsAClearError) {
  BoundSocket stale("stale");  // a socket file left behind by an agent that is gone
  close(stale.fd);
  stale.fd = -1;
  auto c = ControlClient::connect(stale.path, 1000);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.failure(), CallFailure::kUnreachable);
  EXPECT_TRUE(contains(c.error(), "cannot reach the egpu agent at " + stale.path)) << c.error();
  EXPECT_TRUE(contains(c.error(), "Connection refused")) << c.error();
  EXPECT_TRUE(contains(c.error(), "is egpu-agentd running?")) << c.error();
}

TEST(ControlClient, ListenerThatNeverAcceptsTimesOutAtTheDeadline) {
  BoundSocket listener("full");
  ASSERT_EQ(listen(listener.fd, 0), 0);
  // Fill the backlog: a Unix socket's connect then says EAGAIN, with nothing to poll for.
  std::vector<UniqueFd> waiting;
  for (int i = 0; i < 16; ++i) {
    waiting.emplace_back(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (connect(waiting.back().get(), listener.sa(), sizeof listener.addr) != 0) break;
  }
  ASSERT_EQ(errno, EAGAIN);
  const int64_t start = monotonic_ns();
  auto c = ControlClient::connect(listener.path, 300);
  const int64_t elapsed_ms = ms_since(start);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.failure(), CallFailure::kUnreachable);
  EXPECT_TRUE(contains(c.error(), "timed out")) << c.error();
  EXPECT_GE(elapsed_ms, 300);
  EXPECT_LT(elapsed_ms, 30'000);  // not waiting for the backlog to clear (a bound, not a measure)
}

TEST(ControlClient, AgentGoneBeforeTheRequestIsAnErrorNotSigpipe) {
  ScriptedAgent agent([](int) {});
  auto c = ControlClient::connect(agent.path(), 1000);
  ASSERT_TRUE(c.ok()) << c.error();
  agent.wait();               // it accepted and closed
  auto r = c->call(kStatus);  // a SIGPIPE would end the test program here
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure(), CallFailure::kUnreachable);
  EXPECT_TRUE(contains(r.error(), "closed the connection")) << r.error();
}

// Calls `agent` on a connection with `timeout_ms` per call: the call must fail
// at its deadline, not before it, nor long after (a loaded machine may run
// the client late, so "long" is half a minute).
void expect_call_times_out(const ScriptedAgent& agent, int timeout_ms) {
  auto c = ControlClient::connect(agent.path(), timeout_ms);
  ASSERT_TRUE(c.ok()) << c.error();
  const int64_t start = monotonic_ns();
  auto r = c->call(kStatus);
  const int64_t elapsed_ms = ms_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure(), CallFailure::kUnreachable);
  EXPECT_TRUE(contains(r.error(), "timed out")) << r.error();
  EXPECT_GE(elapsed_ms, timeout_ms);
  EXPECT_LT(elapsed_ms, timeout_ms + 30'000);
}

TEST(ControlClient, SilentAgentTimesOutAtTheDeadline) {
  ScriptedAgent agent([](int conn) {
    read_request(conn);
    wait_for_close(conn);
  });
  expect_call_times_out(agent, 300);
}

TEST(ControlClient, RepliesInChunksAreJoined) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    send_with_fds(conn, encode_reply(chunk("{\"gpus\":", true), id));
    send_with_fds(conn, encode_reply(chunk("[1,2", true), id));
    send_with_fds(conn, encode_reply(chunk("]}", false), id));
  });
  auto c = ControlClient::connect(agent.path(), 1000);
  ASSERT_TRUE(c.ok()) << c.error();
  auto r = c->call(kStatus);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, ReplyStatus::kOk);
  EXPECT_EQ(r->instance_id, 9u);
  EXPECT_EQ(r->text, "{\"gpus\":[1,2]}");
  EXPECT_EQ(r->flags, 0u);
}

TEST(ControlClient, ChunksThatNeverEndAreBoundedByOneDeadline) {
  // Each chunk comes well within the timeout; only a deadline for the whole
  // call stops it.
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    for (int i = 0; i < 30; ++i) {
      if (!send_with_fds(conn, encode_reply(chunk("x", true), id))) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  expect_call_times_out(agent, 400);
}

TEST(ControlClient, ASharedDeadlineCoversConnectAndCall) {
  // In seconds, so that a busy host's stall does not eat the connect's
  // share; the reply comes past the deadline however late the call starts.
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    std::this_thread::sleep_for(milliseconds(1500));
    send_with_fds(conn, encode_reply(chunk("late", false), id));
  });
  const int64_t start = monotonic_ns();
  auto c = ControlClient::connect(agent.path(), Deadline::after_ms(3000));
  ASSERT_TRUE(c.ok()) << c.error();
  std::this_thread::sleep_for(milliseconds(2000));
  // 1 s of the deadline is left; 3 s of its own would see the reply at 1.5 s.
  auto r = c->call(kStatus);
  const int64_t elapsed_ms = ms_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error(), "timed out")) << r.error();
  EXPECT_GE(elapsed_ms, 3000);
}

TEST(ControlClient, OversizedReplyIsTruncationNotAReply) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    std::vector<uint8_t> big = encode_reply(chunk(std::string(kMaxReplySize, 'j'), false), id);
    big.resize(kMaxReplySize + 100, 'j');  // more than any reply may be
    send_with_fds(conn, big);
  });
  auto c = ControlClient::connect(agent.path(), 1000);
  ASSERT_TRUE(c.ok()) << c.error();
  auto r = c->call(kStatus);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure(), CallFailure::kUnreachable);
  EXPECT_TRUE(contains(r.error(), "truncated")) << r.error();
}

TEST(ControlClient, ReplyCutShortIsMalformed) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    std::vector<uint8_t> bytes = encode_reply(chunk("cut", false), id);
    bytes.resize(bytes.size() / 2);
    send_with_fds(conn, bytes);
  });
  auto c = ControlClient::connect(agent.path(), 1000);
  ASSERT_TRUE(c.ok()) << c.error();
  auto r = c->call(kStatus);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error(), "malformed reply")) << r.error();
}

TEST(ControlClient, ANonOkStatusIsAReplyNotAFailure) {
  ScriptedAgent agent([](int conn) {
    Reply r;
    r.status = ReplyStatus::kDenied;
    r.text = "not yours";
    send_with_fds(conn, encode_reply(r, read_request(conn)));
  });
  auto c = ControlClient::connect(agent.path(), 1000);
  ASSERT_TRUE(c.ok()) << c.error();
  auto r = c->call(kStatus);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, ReplyStatus::kDenied);
  EXPECT_EQ(r->text, "not yours");
}

std::atomic<int> g_signals{0};
void count_signal(int) {
  g_signals.fetch_add(1);
}

TEST(ControlClient, SignalsDuringTheWaitAreWaitedOut) {
  struct sigaction sa {};
  sa.sa_handler = count_signal;  // no SA_RESTART: poll fails with EINTR
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    std::this_thread::sleep_for(milliseconds(200));
    send_with_fds(conn, encode_reply(chunk("after the signals", false), id));
  });
  auto c = ControlClient::connect(agent.path(), 2000);
  ASSERT_TRUE(c.ok()) << c.error();
  std::atomic<bool> done{false};
  const pthread_t caller = pthread_self();
  std::thread signaller([&] {
    while (!done.load()) {
      pthread_kill(caller, SIGUSR1);
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  auto r = c->call(kStatus);
  done.store(true);
  signaller.join();
  sigaction(SIGUSR1, &old, nullptr);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->text, "after the signals");
  EXPECT_GT(g_signals.load(), 0);
}

}  // namespace
}  // namespace egpu::protocol
