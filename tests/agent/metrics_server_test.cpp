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
#include <string>
#include <thread>
#include <vector>

#include "nodeagent/event_loop.h"

namespace egpu::agent {
namespace {

std::string get_metrics(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    if (::send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req - 1)) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0)
        reply.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return reply;
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
  // The loop wakes at least every 10 ms to see whether the clients are done.
  EventHandle wake(event_new(
      base->get(), -1, EV_PERSIST, [](evutil_socket_t, short, void*) {}, nullptr));
  const timeval every{0, 10'000};
  ASSERT_EQ(event_add(wake.get(), &every), 0);
  while (clients_done.load() < 2)
    event_base_loop(base->get(), EVLOOP_ONCE);
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

}  // namespace
}  // namespace egpu::agent
