#include "child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace egpu::test_child {

namespace {

using std::chrono::milliseconds;

[[noreturn]] void throw_errno(const std::string& what, int error) {
  throw std::system_error(error, std::generic_category(), what);
}

// Closes the descriptor it holds unless released: the constructor's many
// failure paths then leak nothing.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() { reset(); }
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  OwnedFd read_end;
  OwnedFd write_end;
};

// A pipe whose both ends are closed on exec: the child gets its end through
// dup2 onto a standard stream, and other children never inherit either.
Pipe make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2", errno);
  Pipe result;
  result.read_end.reset(fds[0]);
  result.write_end.reset(fds[1]);
  return result;
}

// The environment `options` asks for, as "NAME=value" strings.
std::vector<std::string> child_environment(const ChildOptions& options) {
  std::vector<std::string> result;
  for (char** entry = options.inherit_env ? environ : nullptr;
       entry != nullptr && *entry != nullptr; ++entry) {
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

// Where the child's stream goes (the child's end) and what the test keeps
// (the parent's end, -1 when nothing): a memory file is both.
struct OutputEnds {
  OwnedFd child_end;
  OwnedFd parent_end;
};

OutputEnds open_output(OutputMode mode, const char* name) {
  OutputEnds ends;
  switch (mode) {
    case OutputMode::kInherit:
      break;
    case OutputMode::kCapture: {
      const int fd = memfd_create(name, MFD_CLOEXEC);
      if (fd < 0) throw_errno("memfd_create", errno);
      ends.parent_end.reset(fd);
      ends.child_end.reset(fcntl(fd, F_DUPFD_CLOEXEC, 0));
      if (ends.child_end.get() < 0) throw_errno("dup", errno);
      break;
    }
    case OutputMode::kDiscard: {
      const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (fd < 0) throw_errno("open /dev/null", errno);
      ends.child_end.reset(fd);
      break;
    }
    case OutputMode::kPipe: {
      Pipe pipe = make_pipe();
      ends.child_end.reset(pipe.write_end.release());
      ends.parent_end.reset(pipe.read_end.release());
      break;
    }
  }
  return ends;
}

std::string read_all(int fd) {
  std::string text;
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
  if (WIFEXITED(wait_status)) return ExitStatus::exited_with(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return ExitStatus::killed_by(WTERMSIG(wait_status));
  return {};
}

double seconds_of(const timeval& time) {
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Time left until `deadline`, rounded up so that no wait ends before it.
milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exit " + std::to_string(code);
  return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

ChildProcess::ChildProcess(const ChildOptions& options)
    : stdout_mode_(options.stdout_mode), stderr_mode_(options.stderr_mode) {
  if (options.argv.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  if (options.stderr_mode == OutputMode::kPipe) {
    throw std::invalid_argument("ChildProcess: stderr cannot be a pipe (only stdout is read)");
  }
  std::vector<std::string> argv_strings = options.argv;
  std::vector<std::string> env_strings = child_environment(options);
  std::vector<char*> argv = pointers_to(argv_strings);
  std::vector<char*> envp = pointers_to(env_strings);

  Pipe stdin_pipe;
  if (options.stdin_pipe) stdin_pipe = make_pipe();
  OutputEnds out = open_output(options.stdout_mode, "child-stdout");
  OutputEnds err = open_output(options.stderr_mode, "child-stderr");
  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) with nothing written.
  Pipe exec_pipe = make_pipe();
  const int stdin_child = stdin_pipe.read_end.get();
  const int stdout_child = out.child_end.get();
  const int stderr_child = err.child_end.get();
  const int exec_report = exec_pipe.write_end.get();
  const std::optional<uid_t> run_as = options.run_as;
  const std::optional<int> nice = options.nice;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (stdin_child >= 0) dup2(stdin_child, STDIN_FILENO);
    if (stdout_child >= 0) dup2(stdout_child, STDOUT_FILENO);
    if (stderr_child >= 0) dup2(stderr_child, STDERR_FILENO);
    if (nice) (void)setpriority(PRIO_PROCESS, 0, *nice);
    if (run_as && (setgroups(0, nullptr) != 0 || setresgid(*run_as, *run_as, *run_as) != 0 ||
                   setresuid(*run_as, *run_as, *run_as) != 0)) {
      _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!write(exec_report, &error, sizeof error);
    _exit(127);
  }
  const int fork_error = errno;
  exec_pipe.write_end.reset();
  if (pid_ < 0) throw_errno("fork", fork_error);
  int exec_error = 0;
  ssize_t n;
  do {
    n = read(exec_pipe.read_end.get(), &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int ignored;
    waitpid(pid_, &ignored, 0);
    pid_ = -1;
    throw_errno("exec " + options.argv[0], exec_error);
  }
  // The child's ends close here, so a pipe reads EOF once the child (and
  // whatever it passed them to) is gone.
  stdin_fd_ = stdin_pipe.write_end.release();
  stdout_fd_ = out.parent_end.release();
  stderr_fd_ = err.parent_end.release();
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));  // -1: fall back to polling
}

ChildProcess::~ChildProcess() {
  close_fd(stdin_fd_);
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
  rusage usage{};
  pid_t rc;
  do {
    rc = wait4(pid_, &wait_status, WNOHANG, &usage);
  } while (rc < 0 && errno == EINTR);
  if (rc == pid_) {
    status_ = decode(wait_status);
    cpu_seconds_ = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
    return true;
  }
  return false;
}

void ChildProcess::await_exit(milliseconds timeout) const {
  if (pidfd_ >= 0) {
    // Readable once the child has ended; capped so a missed wake-up only
    // costs a second.
    pollfd ready{pidfd_, POLLIN, 0};
    poll(&ready, 1, static_cast<int>(std::min<long long>(timeout.count(), 1000)));
  } else {
    std::this_thread::sleep_for(std::min(timeout, milliseconds(2)));
  }
}

bool ChildProcess::running() {
  return !try_reap();
}

std::optional<ExitStatus> ChildProcess::wait_for(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!try_reap()) {
    const milliseconds left = left_until(deadline);
    if (left.count() <= 0) return std::nullopt;
    await_exit(left);
  }
  return status_;
}

ExitStatus ChildProcess::wait() {
  while (!try_reap())
    await_exit(milliseconds(1000));
  return *status_;
}

bool ChildProcess::wait_exited_unreaped(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (status_) return true;
    siginfo_t info{};
    // WNOWAIT: looks at the ended child without reaping it.
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid_) {
      return true;
    }
    const milliseconds left = left_until(deadline);
    if (left.count() <= 0) return false;
    await_exit(left);
  }
}

void ChildProcess::kill(int signal) {
  if (pid_ > 0 && !status_) ::kill(pid_, signal);
}

std::string ChildProcess::stdout_text() const {
  if (stdout_mode_ != OutputMode::kCapture) throw std::logic_error("stdout is not captured");
  return read_all(stdout_fd_);
}

std::string ChildProcess::stderr_text() const {
  if (stderr_mode_ != OutputMode::kCapture) throw std::logic_error("stderr is not captured");
  return read_all(stderr_fd_);
}

std::optional<std::string> ChildProcess::read_line(milliseconds timeout) {
  if (stdout_mode_ != OutputMode::kPipe) throw std::logic_error("stdout is not a pipe");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::size_t newline = stdout_buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = stdout_buffer_.substr(0, newline);
      stdout_buffer_.erase(0, newline + 1);
      return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;  // EOF seen before
    const milliseconds left = left_until(deadline);
    if (left.count() <= 0) return std::nullopt;
    pollfd readable{stdout_fd_, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      close_fd(stdout_fd_);  // EOF (or a broken pipe): nothing more will come
      return std::nullopt;
    }
    stdout_buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string ChildProcess::read_rest(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string text;
  while (auto line = read_line(std::max(left_until(deadline), milliseconds(0))))
    text += *line + "\n";
  text += stdout_buffer_;  // a last line without '\n'
  stdout_buffer_.clear();
  return text;
}

void ChildProcess::close_stdin() {
  close_fd(stdin_fd_);
}

}  // namespace egpu::test_child
