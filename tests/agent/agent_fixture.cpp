#include "tests/agent/agent_fixture.h"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace egpu::test {

std::string agent_binary() {
  return EGPU_AGENTD_PATH;
}

protocol::CreateRequest create_request(uint64_t job, uint32_t units, uid_t owner, uint32_t gpu) {
  protocol::CreateRequest r{};
  r.job_id = job;
  r.step_id = 0;
  r.gpu_index = gpu;
  r.units = units;
  r.job_units = units;
  r.uid = owner;
  r.gid = owner;
  return r;
}

namespace {
// A bound for a hung agent, not a measure: an agent in the sanitized build
// beside a test's flooders on a busy host may take seconds.
constexpr int kCallTimeoutMs = 30'000;
int g_wake_fd = -1;  // the attached child's end of its instance's wake channel
void kick_agent(int) {
  const uint64_t one = 1;
  (void)!send(g_wake_fd, &one, sizeof one, MSG_DONTWAIT | MSG_NOSIGNAL);
}
}  // namespace

pid_t attached_process(const std::string& socket, uint64_t job, uid_t owner,
                       const std::function<bool(const RawReply&)>& then, uint32_t gpu) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    char ok = 0;
    if (setresgid(owner, owner, owner) == 0 && setresuid(owner, owner, owner) == 0) {
      auto att = attach(socket, job, 0, gpu);
      ok = att && att->reply.status == protocol::ReplyStatus::kOk && (!then || then(*att)) ? 1 : 0;
      if (ok == 1 && att->fds.size() >= 3) {
        g_wake_fd = att->fds[2];
        signal(SIGUSR1, kick_agent);
      }
    }
    (void)!write(ready[1], &ok, 1);
    for (;;)
      pause();
  }
  char ok = 0;
  const bool replied = read(ready[0], &ok, 1) == 1;
  close(ready[0]);
  close(ready[1]);
  if (!replied || ok != 1) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return -1;
  }
  return child;
}

AgentProcess::AgentProcess(std::string extra_config, int gpu_count, uint64_t gpu_memory_mib) {
  char tmpl[] = "/tmp/egpu-agent-test-XXXXXX";
  dir_ = mkdtemp(tmpl);
  chmod(dir_.c_str(), 0755);
  socket_ = dir_ + "/agent.sock";
  config_ = dir_ + "/egpu.conf";
  // Tests log every decision; a caller that sets LogLevel (a benchmark
  // measuring the agent as deployed) chooses its own.
  const bool own_level = extra_config.find("LogLevel=") != std::string::npos;
  std::ofstream(config_) << "RuntimeDir=" << dir_ << "/run\nSocketPath=" << socket_
                         << "\nGpuCount=" << gpu_count << "\nGpuMemory=" << gpu_memory_mib << "M\n"
                         << (own_level ? "" : "LogLevel=debug\n") << extra_config << "\n";
  // For experiments: more egpu.conf lines for every test agent.
  if (const char* more = std::getenv("EGPU_TEST_AGENT_CONFIG"))
    std::ofstream(config_, std::ios::app) << more << "\n";
  mkdir((dir_ + "/run").c_str(), 0755);
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0) kill_hard();
  std::string cmd = "rm -rf '" + dir_ + "'";
  (void)!system(cmd.c_str());
}

bool AgentProcess::set_socket_path(const std::string& path) {
  std::ifstream in(config_);
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string line = "SocketPath=" + socket_ + "\n";
  const size_t at = config.find(line);
  if (at == std::string::npos) return false;
  config.replace(at, line.size(), "SocketPath=" + path + "\n");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec || !(std::ofstream(config_, std::ios::trunc) << config)) return false;
  socket_ = path;
  return true;
}

void AgentProcess::set_env(const std::string& name, const std::string& value) {
  env_.emplace_back(name, value);
}

bool AgentProcess::start() {
  const pid_t test = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // A test that ctest kills on its timeout (or that crashes) takes its
    // agent with it, instead of leaving it to the tests that come next.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != test) _exit(126);
    // The priority etc/systemd/egpu-agentd.service gives it (Nice=-10): its
    // ticks must not queue behind the machine's load. Refused when not root.
    (void)setpriority(PRIO_PROCESS, 0, -10);
    for (const auto& [name, value] : env_) {
      if (name == "LD_PRELOAD") {
        // A sanitized agent wants its runtime first; a preloaded fixture
        // comes before it, which is harmless for what fixtures interpose.
        const char* asan = std::getenv("ASAN_OPTIONS");
        const std::string opts =
            std::string(asan ? asan : "") + (asan && *asan ? ":" : "") + "verify_asan_link_order=0";
        setenv("ASAN_OPTIONS", opts.c_str(), 1);
      }
      setenv(name.c_str(), value.c_str(), 1);
    }
    int log = open((dir_ + "/agent.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(log, 2);
    dup2(log, 1);
    execl(agent_binary().c_str(), "egpu-agentd", "-f", config_.c_str(), nullptr);
    _exit(127);
  }
  // Until it answers or exits; a loaded machine may take its time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto c = protocol::ControlClient::connect(socket_, 200)) {
      if (c->call(protocol::StatusRequest{0, 0})) return true;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

void AgentProcess::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

bool AgentProcess::stop() {
  if (pid_ <= 0) return false;
  ::kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string AgentProcess::log() const {
  std::ifstream in(dir_ + "/agent.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<protocol::Reply> AgentProcess::call(const protocol::Request& request) const {
  auto c = protocol::ControlClient::connect(socket_, kCallTimeoutMs);
  if (!c) return Error{c.error()};
  return c->call(request);
}

bool readable_within(int fd, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (n == 1) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

bool become(uid_t uid) {
  return setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 &&
         setresuid(uid, uid, uid) == 0;
}

int run_as(uid_t uid, const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!become(uid)) _exit(99);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Result<RawReply> attach(const std::string& socket, uint64_t job, uint32_t step, uint32_t gpu) {
  auto c = protocol::ControlClient::connect(socket, Deadline::after_ms(kCallTimeoutMs));
  if (!c) return Error{c.error()};
  auto r = c->call_with_fds(protocol::AttachRequest{job, step, gpu});
  if (!r) return Error{r.error()};
  RawReply out{std::move(r->reply), {}};
  for (UniqueFd& fd : r->fds)
    out.fds.push_back(fd.release());
  return out;
}

std::string fetch_metrics(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    if (write(fd, req, sizeof req - 1) == static_cast<ssize_t>(sizeof req - 1)) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
        reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return reply;
}

}  // namespace egpu::test
