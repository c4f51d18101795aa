// A child process owned by a test: spawned with argv and extra environment,
// stdout (and optionally stderr) captured in memory files, waited for with a
// timeout, signalled, and always reaped: the destructor SIGKILLs a child that
// still runs. Children also get SIGKILL if the spawning thread dies.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace egpu::harness {

enum class OutputMode {
  kInherit,  // the test's own stream
  kCapture,  // kept for stdout_text()/stderr_text()
  kDiscard,  // /dev/null
};

struct ChildOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // added to (or replacing) the test's environment
  std::vector<std::string> unset_env;      // removed from it
  OutputMode stdout_mode = OutputMode::kCapture;
  OutputMode stderr_mode = OutputMode::kInherit;
};

struct ExitStatus {
  bool exited = false;  // normal exit, `code` valid
  int code = 0;
  int signal = 0;  // killed by this signal when !exited
  bool success() const { return exited && code == 0; }
  std::string describe() const;  // "exit 0", "signal 9 (Killed)"
};

class ChildProcess {
 public:
  // Throws std::system_error when the program cannot be started (exec errors
  // included).
  explicit ChildProcess(const ChildOptions& options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Whether it still runs; reaps it when it has ended.
  bool running();
  // The exit status once it ends, or nullopt after `timeout`.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  ExitStatus wait();
  // Sends `signal` unless the child has been reaped already.
  void kill(int signal);

  // What the child has written so far (the whole of it once it has ended).
  std::string stdout_text() const;
  std::string stderr_text() const;

 private:
  bool try_reap();

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::optional<ExitStatus> status_;
};

}  // namespace egpu::harness
