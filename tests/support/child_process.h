// A child process owned by a test: spawned with argv and an environment,
// stdout/stderr captured in memory files or read through a pipe, stdin
// optionally fed through a pipe, waited for with a timeout, signalled, and
// always reaped: the destructor SIGKILLs a child that still runs. Children also
// get SIGKILL if the spawning thread dies. The one spawner of the test suites
// (the harness, the simgpu driver tests and the shim process tests).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace egpu::test_child {

enum class OutputMode {
  kInherit,  // the test's own stream
  kCapture,  // a memory file, read whole with stdout_text()/stderr_text()
  kDiscard,  // /dev/null
  kPipe,     // stdout only: a pipe read as it comes with read_line()/read_rest()
};

struct ChildOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // added to (or replacing) the test's environment
  std::vector<std::string> unset_env;      // removed from it
  // false: the child's environment is `env` alone, so nothing of the test's
  // own (EGPU_* of an enclosing job, say) leaks into it.
  bool inherit_env = true;
  // true: stdin is a pipe the test holds (close_stdin() gives the child EOF);
  // false: the test's own stdin.
  bool stdin_pipe = false;
  OutputMode stdout_mode = OutputMode::kCapture;
  OutputMode stderr_mode = OutputMode::kInherit;
  // Runs the program as this uid (and gid = uid, no supplementary groups):
  // a job user. Needs root; the child exits 126 if the switch fails.
  std::optional<uid_t> run_as;
  // The child's nice value, set before run_as. Below 0 needs root: where it
  // is refused the child runs at the test's own.
  std::optional<int> nice;
};

struct ExitStatus {
  bool exited = false;  // normal exit, `code` valid
  int code = 0;
  int signal = 0;  // killed by this signal when !exited
  bool success() const { return exited && code == 0; }
  std::string describe() const;  // "exit 0", "signal 9 (Killed)"

  static ExitStatus exited_with(int code) { return {true, code, 0}; }
  static ExitStatus killed_by(int signal) { return {false, 0, signal}; }
  bool operator==(const ExitStatus&) const = default;
};

// So that failed test assertions say "exit 1" rather than bytes.
inline std::ostream& operator<<(std::ostream& out, const ExitStatus& status) {
  return out << status.describe();
}

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
  // The exit status once it ends (reaped), or nullopt after `timeout`.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  ExitStatus wait();
  // Whether it ended within `timeout`, leaving it unreaped (a zombie), for
  // tests of what outlives a dead process's pid.
  bool wait_exited_unreaped(std::chrono::milliseconds timeout);
  // Sends `signal` unless the child has been reaped already (an unreaped
  // child's pid cannot have been reused).
  void kill(int signal);
  // CPU time (user + system) it used; 0 until it is reaped.
  double cpu_seconds() const { return cpu_seconds_; }

  // With OutputMode::kCapture: what the child has written so far (the whole
  // of it once it has ended). Throws std::logic_error in another mode.
  std::string stdout_text() const;
  std::string stderr_text() const;

  // With stdout_mode kPipe (else std::logic_error): the next line of stdout
  // without its '\n', or nullopt on timeout or at EOF.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Everything left on stdout until EOF, or what came before `timeout`.
  std::string read_rest(std::chrono::milliseconds timeout);

  // With stdin_pipe: closes the test's end, so the child reads EOF.
  void close_stdin();

 private:
  bool try_reap();
  // Blocks until the child may have ended or `timeout` passes.
  void await_exit(std::chrono::milliseconds timeout) const;

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  OutputMode stdout_mode_ = OutputMode::kCapture;
  OutputMode stderr_mode_ = OutputMode::kInherit;
  std::string stdout_buffer_;  // kPipe: read but not yet returned as a line
  std::optional<ExitStatus> status_;
  double cpu_seconds_ = 0;
};

}  // namespace egpu::test_child
