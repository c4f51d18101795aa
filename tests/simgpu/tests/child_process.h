// A helper program run by a test: spawned with extra environment, stdin and
// stdout connected by pipes, killed and reaped when the test is done.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace egpu::simgpu::testing {

class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of its stdout (without '\n'); nullopt on timeout or EOF.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Everything until EOF (or the timeout).
  std::string read_rest(std::chrono::milliseconds timeout);

  void close_stdin();
  void signal(int sig);
  // Waits for it to exit without reaping it (it stays a zombie).
  bool wait_exited_unreaped(std::chrono::milliseconds timeout);
  // Reaps it: its exit status, or -signal; nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // CPU time (user + system) it used, once reaped.
  double cpu_seconds() const { return cpu_seconds_; }

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  double cpu_seconds_ = 0;
  std::string buffer_;
};

}  // namespace egpu::simgpu::testing
