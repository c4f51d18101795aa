// attach_flood_bench: what a user flooding the agent's public control socket
// does to another user's calls (a shim's attach is one). Four processes of a
// user with no instance loop connect and close on the public socket; a user
// who owns an instance makes 200 status calls, each with the 2 s a shim's
// attach has, through the public socket alone (as before each user had a
// socket of its own), and as its clients do now (its own socket first).
// Also the public socket with nobody flooding, for scale. Prints one JSON
// object:
//   {"attach_flood": {"flooders": 4, "calls": 200,
//     "quiet_public": {"failed": .., "p50_ms": .., "p99_ms": ..},
//     "flooded_public": {...}, "flooded_own_socket": {...}}}
// A call that fails (no connection or no answer within 2 s) is not in the
// percentiles. Run as root (the users are played by forked children).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/protocol/control_client.h"
#include "tests/agent/agent_fixture.h"

namespace {

using egpu::test::AgentProcess;

constexpr uid_t kFlooder = 4247;  // owns no instance
constexpr uid_t kOwner = 4248;
constexpr int kFlooders = 4;
constexpr int kCalls = 200;
constexpr int kBudgetMs = 2000;  // a shim's attach timeout

struct Row {
  int calls = 0;
  int failed = 0;
  double p50_ms = -1;
  double p99_ms = -1;
};

// kCalls status calls as kOwner; `own_first`: as its clients do, else the
// public socket alone. Measured in a child, read back through a pipe (its
// lines fit the pipe's buffer).
Row calls(const AgentProcess& agent, bool own_first) {
  int ends[2];
  if (::pipe(ends) != 0) return Row{0, kCalls, -1, -1};
  const int rc = egpu::test::run_as(kOwner, [&] {
    ::close(ends[0]);
    std::string lines;
    // At most 30 s a row: calls that each wait out their 2 s add up.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int i = 0; i < kCalls && std::chrono::steady_clock::now() < end; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto c = own_first ? egpu::protocol::ControlClient::connect(agent.socket(), kBudgetMs)
                         : egpu::protocol::ControlClient::connect_only(agent.socket(), kBudgetMs);
      const bool ok = c && c->call(egpu::protocol::StatusRequest{0, 0}).ok();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      lines += std::to_string(ok ? ms : -1.0) + "\n";
    }
    return ::write(ends[1], lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()) ? 0
                                                                                              : 1;
  });
  ::close(ends[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(ends[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(ends[0]);
  Row row;
  if (rc != 0) {
    row.failed = kCalls;
    return row;
  }
  std::vector<double> ms;
  std::istringstream in(text);
  for (double v = 0; in >> v;) {
    ++row.calls;
    if (v < 0) {
      ++row.failed;
    } else {
      ms.push_back(v);
    }
  }
  std::sort(ms.begin(), ms.end());
  if (!ms.empty()) {
    row.p50_ms = ms[ms.size() / 2];
    row.p99_ms = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  }
  return row;
}

std::vector<pid_t> start_flooders(const std::string& socket) {
  std::vector<pid_t> pids;
  for (int i = 0; i < kFlooders; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const pid_t bench = ::getppid();
      if (!egpu::test::become(kFlooder)) ::_exit(99);
      (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the bench
      if (::getppid() != bench) ::_exit(0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
      for (;;) {
        const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        ::close(fd);
      }
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

void stop(const std::vector<pid_t>& pids) {
  for (const pid_t pid : pids) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

std::string json(const char* name, const Row& r) {
  char buf[192];
  std::snprintf(buf, sizeof buf,
                "\"%s\": {\"calls\": %d, \"failed\": %d, \"p50_ms\": %.2f, \"p99_ms\": %.2f}", name,
                r.calls, r.failed, r.p50_ms, r.p99_ms);
  return buf;
}

}  // namespace

int main() {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "attach_flood_bench: run as root (it plays two users)\n");
    return 2;
  }
  AgentProcess agent;
  if (!agent.start()) {
    std::fprintf(stderr, "attach_flood_bench: the agent did not start:\n%s\n", agent.log().c_str());
    return 1;
  }
  auto created = agent.call(egpu::test::create_request(1, 30, kOwner));
  if (!created || created->status != egpu::protocol::ReplyStatus::kOk) {
    std::fprintf(stderr, "attach_flood_bench: no instance for the owner\n");
    return 1;
  }
  const Row quiet = calls(agent, false);
  const std::vector<pid_t> flooders = start_flooders(agent.socket());
  ::usleep(500'000);  // the flood under way
  const Row flooded = calls(agent, false);
  const Row own = calls(agent, true);
  stop(flooders);
  std::printf("{\"attach_flood\": {\"flooders\": %d, %s, %s, %s}}\n", kFlooders,
              json("quiet_public", quiet).c_str(), json("flooded_public", flooded).c_str(),
              json("flooded_own_socket", own).c_str());
  return 0;
}
