#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <system_error>
#include <thread>

extern char** environ;

namespace egpu::harness {

namespace {

[[noreturn]] void throw_errno(const std::string& what, int error) {
  throw std::system_error(error, std::generic_category(), what);
}

// The test's environment with `options` applied, as "NAME=value" strings.
std::vector<std::string> child_environment(const ChildOptions& options) {
  std::vector<std::string> result;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    const bool replaced = options.env.count(name) != 0;
    const bool removed = std::find(options.unset_env.begin(), options.unset_env.end(), name) !=
                         options.unset_env.end();
    if (!replaced && !removed) result.push_back(text);
  }
  for (const auto& [name, value] : options.env)
    result.push_back(name + "=" + value);
  return result;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings)
    pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// A memory file for captured output, or /dev/null, or -1 to inherit.
int open_output(OutputMode mode, const char* name) {
  switch (mode) {
    case OutputMode::kInherit:
      return -1;
    case OutputMode::kCapture: {
      const int fd = memfd_create(name, MFD_CLOEXEC);
      if (fd < 0) throw_errno("memfd_create", errno);
      return fd;
    }
    case OutputMode::kDiscard: {
      const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (fd < 0) throw_errno("open /dev/null", errno);
      return fd;
    }
  }
  return -1;
}

std::string read_all(int fd) {
  std::string text;
  if (fd < 0) return text;
  char buffer[65536];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = pread(fd, buffer, sizeof buffer, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    offset += n;
  }
  return text;
}

ExitStatus decode(int wait_status) {
  ExitStatus status;
  if (WIFEXITED(wait_status)) {
    status.exited = true;
    status.code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
  }
  return status;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exit " + std::to_string(code);
  return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

ChildProcess::ChildProcess(const ChildOptions& options) {
  if (options.argv.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  std::vector<std::string> argv_strings = options.argv;
  std::vector<std::string> env_strings = child_environment(options);
  std::vector<char*> argv = pointers_to(argv_strings);
  std::vector<char*> envp = pointers_to(env_strings);

  stdout_fd_ = open_output(options.stdout_mode, "child-stdout");
  try {
    stderr_fd_ = open_output(options.stderr_mode, "child-stderr");
  } catch (...) {
    close_fd(stdout_fd_);
    throw;
  }
  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) with nothing written.
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    close_fd(stdout_fd_);
    close_fd(stderr_fd_);
    throw_errno("pipe2", error);
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (stdout_fd_ >= 0) dup2(stdout_fd_, STDOUT_FILENO);
    if (stderr_fd_ >= 0) dup2(stderr_fd_, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!write(exec_pipe[1], &error, sizeof error);
    _exit(127);
  }
  const int fork_error = errno;
  close(exec_pipe[1]);
  if (pid_ < 0) {
    close(exec_pipe[0]);
    close_fd(stdout_fd_);
    close_fd(stderr_fd_);
    throw_errno("fork", fork_error);
  }
  int exec_error = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n > 0) {
    int ignored;
    waitpid(pid_, &ignored, 0);
    pid_ = -1;
    close_fd(stdout_fd_);
    close_fd(stderr_fd_);
    throw_errno("exec " + options.argv[0], exec_error);
  }
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));  // -1: fall back to polling
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
  close_fd(pidfd_);
  close_fd(stdout_fd_);
  close_fd(stderr_fd_);
}

bool ChildProcess::try_reap() {
  if (status_) return true;
  int wait_status = 0;
  pid_t rc;
  do {
    rc = waitpid(pid_, &wait_status, WNOHANG);
  } while (rc < 0 && errno == EINTR);
  if (rc == pid_) {
    status_ = decode(wait_status);
    return true;
  }
  return false;
}

bool ChildProcess::running() {
  return !try_reap();
}

std::optional<ExitStatus> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!try_reap()) {
    // Rounded up, so the wait never ends before the timeout.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (pidfd_ >= 0) {
      pollfd ready{pidfd_, POLLIN, 0};
      poll(&ready, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(2)));
    }
  }
  return status_;
}

ExitStatus ChildProcess::wait() {
  while (!try_reap()) {
    if (pidfd_ >= 0) {
      pollfd ready{pidfd_, POLLIN, 0};
      poll(&ready, 1, 1000);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return *status_;
}

void ChildProcess::kill(int signal) {
  if (pid_ > 0 && !try_reap()) ::kill(pid_, signal);
}

std::string ChildProcess::stdout_text() const {
  return read_all(stdout_fd_);
}

std::string ChildProcess::stderr_text() const {
  return read_all(stderr_fd_);
}

}  // namespace egpu::harness
