// AgentFixture: a real egpu-agentd in a private runtime directory, started as
// a child process for tests, with helpers to talk to it as root or as another
// uid (via a forked child that drops its credentials).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/util/result.h"

namespace egpu::test {

class AgentProcess {
 public:
  // `extra_config` lines are appended to a config that sets RuntimeDir,
  // SocketPath, GpuCount and GpuMemory (in MiB).
  explicit AgentProcess(std::string extra_config = "", int gpu_count = 2,
                        uint64_t gpu_memory_mib = 80 * 1024);
  ~AgentProcess();

  // Moves SocketPath to `path` (its directories made) from the next start
  // on; false if the config could not be changed.
  bool set_socket_path(const std::string& path);
  // Set in the agent's environment from the next start on.
  void set_env(const std::string& name, const std::string& value);
  bool start();      // waits until the socket answers
  void kill_hard();  // SIGKILL, reaped
  bool stop();       // SIGTERM, true when it exits 0
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  const std::string& socket() const { return socket_; }
  const std::string& config_path() const { return config_; }
  std::string log() const;

  Result<protocol::Reply> call(const protocol::Request& request) const;

 private:
  std::string dir_;
  std::string socket_;
  std::string config_;
  pid_t pid_ = -1;
  std::vector<std::pair<std::string, std::string>> env_;
};

// Whether `fd` becomes readable within `limit` (a signal does not end the wait).
bool readable_within(int fd, std::chrono::milliseconds limit);

// Switches this process to `uid` (group `uid`, no supplementary groups), for
// good; false if it could not.
bool become(uid_t uid);

// Runs `body` in a forked child with uid/gid switched to `uid`; returns its
// exit code (body's return value), or -1 if it crashed.
int run_as(uid_t uid, const std::function<int()>& body);

// An attach as job `job` step `step` on GPU `gpu`: the reply whatever its
// status, and the descriptors it carried.
struct RawReply {
  protocol::Reply reply;
  std::vector<int> fds;  // caller closes
};
Result<RawReply> attach(const std::string& socket, uint64_t job, uint32_t step, uint32_t gpu);

// A CreateRequest for job `job` step 0 on GPU `gpu`, all `units` the job's,
// owned by `owner` (uid and gid).
protocol::CreateRequest create_request(uint64_t job, uint32_t units, uid_t owner, uint32_t gpu = 0);

// A forked process of job `job` (step 0, GPU `gpu`) attached as `owner`; it waits
// until killed. SIGUSR1 makes it wake the agent (its wake channel), as a shim does
// when it starts to wait. `then`, if given, runs in it after the attach (a
// false return fails it). Returns its pid, or -1 if the attach failed.
pid_t attached_process(const std::string& socket, uint64_t job, uid_t owner,
                       const std::function<bool(const RawReply&)>& then = {}, uint32_t gpu = 0);

std::string agent_binary();

// The whole reply (status line, headers, body) to GET /metrics on the
// loopback port; empty when nothing answered.
std::string fetch_metrics(uint16_t port);

}  // namespace egpu::test
