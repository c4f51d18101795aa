// MetricsServer in this process: its event loop runs on the test's thread,
// clients on another.
#include "nodeagent/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nodeagent/event_loop.h"

namespace egpu::agent {
namespace {

// How a client ends its request: as most do, by shutting its sending side
// (HTTP/1.0 scripts, nc -N), or with more bytes after it.
enum class After { kNothing, kShutdown, kMoreBytes };

std::string get_metrics(int port, After after = After::kNothing) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    if (::send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req - 1)) {
      if (after == After::kShutdown) ::shutdown(fd, SHUT_WR);
      if (after == After::kMoreBytes) {
        const char more[] = "BREW /pot HTTP/1.1\r\n\r\n";
        (void)::send(fd, more, sizeof more - 1, MSG_NOSIGNAL);
      }
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0)
        reply.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return reply;
}

// Runs `base`'s loop on this thread until `done` holds (it wakes every 10 ms
// to look).
void loop_until(event_base* base, const std::function<bool()>& done) {
  EventHandle wake(event_new(
      base, -1, EV_PERSIST, [](evutil_socket_t, short, void*) {}, nullptr));
  const timeval every{0, 10'000};
  ASSERT_EQ(event_add(wake.get(), &every), 0);
  while (!done())
    event_base_loop(base, EVLOOP_ONCE);
}

// Clients that GET in a loop (two at a time, as many as a user may hold)
// would have the agent's one thread render the exposition, a pass over
// every instance, for each of them. Renders are at least the interval
// apart, and each answers every request that waited for it: however many
// requests come, renders stay within the time they took over the interval,
// and every request is answered with the exposition.
TEST(MetricsServer, RequestsInALoopShareRendersAtMostOneAnInterval) {
  auto base = make_agent_event_base();
  ASSERT_TRUE(base.ok()) << base.error();
  std::atomic<int> rendered{0};
  MetricsLimits limits;
  limits.min_render_interval_ms = 200;
  auto server = MetricsServer::start(
      base->get(), "127.0.0.1", 0,
      [&] { return "egpu_agent_up 1\nrender " + std::to_string(++rendered) + "\n"; }, limits);
  ASSERT_TRUE(server.ok()) << server.error();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  constexpr int kRequests = 40;
  std::atomic<int> answered{0};
  std::atomic<int> clients_done{0};
  const auto began = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int t = 0; t < 2; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < kRequests / 2; ++i) {
        if (get_metrics(port).find("egpu_agent_up 1") != std::string::npos) ++answered;
      }
      ++clients_done;
    });
  }
  loop_until(base->get(), [&] { return clients_done.load() == 2; });
  for (auto& c : clients)
    c.join();
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  EXPECT_EQ(answered.load(), kRequests);
  // The first at once, then at most one each interval.
  const int most = 1 + static_cast<int>(elapsed_ms / limits.min_render_interval_ms) + 1;
  EXPECT_LE(rendered.load(), most) << "in " << elapsed_ms << " ms";
  EXPECT_LT(rendered.load(), kRequests);
  EXPECT_EQ((*server)->renders(), static_cast<uint64_t>(rendered.load()));
}

// A request waiting for the next render is answered once, whatever its
// client does meanwhile: one that shut its sending side was closed
// unanswered at that end of file, and bytes after the request were read as
// another request (a 400 before the render's 200).
TEST(MetricsServer, AWaitingRequestIsAnsweredOnceWhateverItsClientSendsOrShuts) {
  auto base = make_agent_event_base();
  ASSERT_TRUE(base.ok()) << base.error();
  MetricsLimits limits;
  limits.min_render_interval_ms = 1000;  // the two requests after the first wait
  auto server = MetricsServer::start(
      base->get(), "127.0.0.1", 0, [] { return std::string("egpu_agent_up 1\n"); }, limits);
  ASSERT_TRUE(server.ok()) << server.error();
  const int port = (*server)->port();
  std::string first, shut, more;
  std::atomic<bool> done{false};
  std::thread client([&] {
    first = get_metrics(port);
    shut = get_metrics(port, After::kShutdown);
    more = get_metrics(port, After::kMoreBytes);
    done = true;
  });
  loop_until(base->get(), [&] { return done.load(); });
  client.join();
  const auto answers = [](const std::string& reply) {
    size_t n = 0;
    for (size_t at = reply.find("HTTP/1.1 "); at != std::string::npos;
         at = reply.find("HTTP/1.1 ", at + 1))
      ++n;
    return n;
  };
  EXPECT_NE(first.find("egpu_agent_up 1"), std::string::npos) << first;
  EXPECT_NE(shut.find("egpu_agent_up 1"), std::string::npos) << "[" << shut << "]";
  EXPECT_NE(more.find("egpu_agent_up 1"), std::string::npos) << more;
  EXPECT_EQ(answers(more), 1u) << more;
}

}  // namespace
}  // namespace egpu::agent
