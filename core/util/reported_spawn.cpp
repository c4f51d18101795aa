#include "core/util/reported_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace egpu {
namespace {

// What the reporter writes: kind 0 = the command's wait status, 1 = the
// errno that kept it from starting.
struct Message {
  int32_t kind;
  int32_t value;
};

// execvp's search, before the child exists: the first regular executable
// file; EACCES when only unusable ones were found, ENOENT when none.
Result<std::string> find_program(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return name;
  int why = ENOENT;
  for (size_t at = 0; at <= path.size();) {
    const size_t colon = std::min(path.find(':', at), path.size());
    const std::string dir = path.substr(at, colon - at);
    at = colon + 1;
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    why = EACCES;
  }
  return Error{"cannot run " + name + ": " + std::strerror(why)};
}

// The PATH that finds the command: the children's own, else this process's,
// else glibc's default.
std::string search_path(char* const* envp) {
  for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  }
  const char* own = ::getenv("PATH");
  return own != nullptr ? own : "/bin:/usr/bin";
}

// From here on, in the copies: system calls only (this process may have had
// other threads, whose locks the copy would wait on forever).

[[noreturn]] void say(int kind, int value) {
  const Message m{kind, value};
  (void)!::write(3, &m, sizeof m);
  ::_exit(kind == 0 ? 0 : 125);
}

// Handlers this process set must not run in a copy of it: back to the
// default. SIGCHLD too when ignored: the reporter must reap the command.
// SIGPIPE too (systemd and slurmstepd start us with it ignored): a command
// whose output is no longer read ends, as from a shell, instead of writing
// on into EPIPE.
void default_handlers() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) != 0) continue;
    if (sig == SIGCHLD || sig == SIGPIPE ||
        (now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN))
      ::sigaction(sig, &dfl, nullptr);
  }
}

void close_from(int first) {
  if (::syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  struct rlimit limit {};
  const rlim_t last =
      ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::min<rlim_t>(limit.rlim_cur, 1 << 20) : 1024;
  for (rlim_t fd = static_cast<rlim_t>(first); fd < last; ++fd)
    ::close(static_cast<int>(fd));
}

// Gives up the caller's controlling terminal, for this process and what it
// starts. The command may run as another user (egpuctl relays through
// runuser -u, which keeps the session): with root's terminal as its own, a
// process of that user could open /dev/tty and type into root's shell
// (TIOCSTI) or write to it. setsid() would also do, but the caller makes
// this process a group leader, which setsid() then refuses.
void leave_terminal() {
  const int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (tty < 0) return;  // none (ENXIO), or none reachable
  (void)::ioctl(tty, TIOCNOTTY);
  ::close(tty);
}

[[noreturn]] void run_reporter(const char* program, char* const* args, char* const* envp,
                               int null_fd, int out_w, int err_w, int report_w) {
  ::setpgid(0, 0);
  leave_terminal();
  default_handlers();
  // The command gets 0, 1, 2; the reporter keeps 3 for its message; all
  // else of this process's is closed (copies above 4 first, so that no
  // dup2 lands on one of its own sources or leaves a close-on-exec flag).
  const int in = ::fcntl(null_fd, F_DUPFD, 5), out = ::fcntl(out_w, F_DUPFD, 5),
            err = ::fcntl(err_w, F_DUPFD, 5), rep = ::fcntl(report_w, F_DUPFD, 5);
  if (in < 0 || out < 0 || err < 0 || rep < 0 || ::dup2(rep, 3) != 3) {
    const Message m{1, errno};
    (void)!::write(report_w, &m, sizeof m);
    ::_exit(125);
  }
  const int why_dup = ::dup2(in, 0) == 0 && ::dup2(out, 1) == 1 && ::dup2(err, 2) == 2 ? 0 : errno;
  close_from(4);
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
  if (why_dup != 0) say(1, why_dup);
  // The deadline's TERM is the command's; the KILL that follows ends both.
  sigset_t term;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_SETMASK, &term, nullptr);
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) say(1, errno);
  const long command =
      ::syscall(SYS_clone, static_cast<long>(SIGCHLD), nullptr, nullptr, nullptr, nullptr);
  if (command == 0) {
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(program, args, envp);
    const int why = errno;
    (void)!::write(exec_pipe[1], &why, sizeof why);
    ::_exit(127);
  }
  const int clone_errno = errno;
  ::close(exec_pipe[1]);
  if (command < 0) say(1, clone_errno);
  // A TERM for the group that came while it was blocked here is the
  // command's.
  sigset_t pending;
  if (::sigpending(&pending) == 0 && ::sigismember(&pending, SIGTERM) == 1)
    ::kill(static_cast<pid_t>(command), SIGTERM);
  // Only the command could still hold the pipe: this ends at its exec.
  int why = 0;
  ssize_t n;
  while ((n = ::read(exec_pipe[0], &why, sizeof why)) < 0 && errno == EINTR) {
  }
  int status = 0;
  pid_t reaped;
  if (n == static_cast<ssize_t>(sizeof why)) {
    while (::waitpid(static_cast<pid_t>(command), &status, 0) < 0 && errno == EINTR) {
    }
    say(1, why);
  }
  // The caller's pipes must reach end of file when the command ends.
  ::close(0);
  ::close(1);
  ::close(2);
  while ((reaped = ::waitpid(static_cast<pid_t>(command), &status, 0)) < 0 && errno == EINTR) {
  }
  if (reaped != static_cast<pid_t>(command)) ::_exit(126);  // its status is lost
  say(0, status);
}

}  // namespace

Result<ReportedChild> spawn_reported(const std::vector<std::string>& argv, char* const* envp) {
  if (argv.empty()) return Error{"empty command"};
  auto program = find_program(argv[0], search_path(envp));
  if (!program) return Error{program.error()};
  UniqueFd ends[3][2];  // out, err, report
  for (auto& end : ends) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return Error{std::string("pipe: ") + std::strerror(errno)};
    end[0].reset(p[0]);
    end[1].reset(p[1]);
  }
  const UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) return Error{std::string("/dev/null: ") + std::strerror(errno)};
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // No handler of this process may run in the copy before it resets them.
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &before);
  const long reporter =
      ::syscall(SYS_clone, 0L /* no exit signal */, nullptr, nullptr, nullptr, nullptr);
  if (reporter == 0) {
    run_reporter(program->c_str(), args.data(), envp, null_fd.get(), ends[0][1].get(),
                 ends[1][1].get(), ends[2][1].get());
  }
  const int clone_errno = errno;
  // Its own group from the start, whichever of the two gets there first: a
  // kill of the group before the copy set it must not miss it.
  if (reporter > 0) ::setpgid(static_cast<pid_t>(reporter), static_cast<pid_t>(reporter));
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (reporter < 0) return Error{"cannot run " + argv[0] + ": " + std::strerror(clone_errno)};
  ReportedChild child;
  child.reporter = static_cast<pid_t>(reporter);
  for (int i = 0; i < 3; ++i)
    ::fcntl(ends[i][0].get(), F_SETFL, O_NONBLOCK);
  child.out = std::move(ends[0][0]);
  child.err = std::move(ends[1][0]);
  child.report = std::move(ends[2][0]);
  return child;
}

Result<Report> read_report(const UniqueFd& report) {
  Message m{};
  ssize_t n;
  while ((n = ::read(report.get(), &m, sizeof m)) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof m)) return Error{"no report"};
  Report r;
  r.started = m.kind == 0;
  (r.started ? r.wait_status : r.exec_errno) = m.value;
  return r;
}

}  // namespace egpu
