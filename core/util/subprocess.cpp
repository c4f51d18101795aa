#include "core/util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/util/clock.h"
#include "core/util/unique_fd.h"

extern char** environ;

namespace egpu {
namespace {

// A started child; the destructor kills and reaps one still running, so no
// path out of run_processes leaves a process behind.
struct Child {
  pid_t pid = -1;  // the reporter (see spawn)
  UniqueFd out, err;
  UniqueFd status;  // the command's wait status, from the reporter
  ProcessOutcome* outcome = nullptr;

  Child() = default;
  Child(Child&& o) noexcept
      : pid(std::exchange(o.pid, -1)),
        out(std::move(o.out)),
        err(std::move(o.err)),
        status(std::move(o.status)),
        outcome(o.outcome) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);  // its group: what it started too
      while (::waitpid(pid, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }
};

// Reads what is there now; false at end of file or on an error.
bool drain(UniqueFd& fd, std::string& into) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      const size_t room = kMaxCapture - std::min(kMaxCapture, into.size());
      into.append(buf, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    fd.reset();
    return false;
  }
}

// Where `name` runs from: itself when it has a '/', else the first
// executable on `path` (execvp's search, done before the child exists).
std::string find_program(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return name;
  for (size_t at = 0; at <= path.size();) {
    const size_t colon = std::min(path.find(':', at), path.size());
    std::string dir = path.substr(at, colon - at);
    at = colon + 1;
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The PATH that finds the command: the children's own, else this process's.
std::string search_path(char* const* envp) {
  for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  }
  const char* own = ::getenv("PATH");
  return own != nullptr ? own : "/usr/bin:/bin";
}

// Sets signals as a new program expects them: handlers this process set
// must not run in a copy of it, and a blocked TERM must end it at the
// deadline. System calls only.
void default_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_DFL &&
        now.sa_handler != SIG_IGN)
      ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Spawns one command with stdout and stderr on pipes; fills outcome's
// spawn_error instead when it cannot.
//
// The command runs under a reporter: a copy of this process cloned with no
// exit signal, which starts the command, waits for it and writes its wait
// status into a pipe. A process that reaps any child of its own
// (slurmstepd's main thread sits in wait3(-1) while the SPANK checkpoint
// thread runs scontrol) would otherwise take the command's exit status, and
// an update that worked would read as failed; the reporter it cannot reap
// (wait3 without __WALL skips children that send no SIGCHLD). Between the
// clone and the exec both make system calls only (this process may have
// other threads; raw clones run no atfork handlers that could wait on their
// locks).
Child spawn(const std::vector<std::string>& argv, ProcessOutcome& outcome, char* const* envp) {
  Child c;
  c.outcome = &outcome;
  if (argv.empty()) {
    outcome.spawn_error = "empty command";
    return c;
  }
  const std::string program = find_program(argv[0], search_path(envp));
  if (program.empty()) {
    outcome.spawn_error = "cannot run " + argv[0] + ": " + std::strerror(ENOENT);
    return c;
  }
  // out, err, the exec error (the command's errno when exec fails; exec
  // closes it), the wait status.
  UniqueFd ends[4][2];
  for (auto& end : ends) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      outcome.spawn_error = std::string("pipe: ") + std::strerror(errno);
      return c;
    }
    end[0].reset(p[0]);
    end[1].reset(p[1]);
  }
  auto& [out_r, out_w] = ends[0];
  auto& [err_r, err_w] = ends[1];
  auto& [exec_r, exec_w] = ends[2];
  auto& [status_r, status_w] = ends[3];
  const UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) {
    outcome.spawn_error = std::string("/dev/null: ") + std::strerror(errno);
    return c;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const long reporter =
      ::syscall(SYS_clone, 0L /* no exit signal */, nullptr, nullptr, nullptr, nullptr);
  if (reporter == 0) {
    ::setpgid(0, 0);  // a group of its own (the command's too), to end it whole
    default_signals();
    // The deadline's TERM is the command's to take; the reporter waits for
    // it (or the KILL that follows ends both).
    sigset_t term;
    ::sigemptyset(&term);
    ::sigaddset(&term, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &term, nullptr);
    const long command =
        ::syscall(SYS_clone, static_cast<long>(SIGCHLD), nullptr, nullptr, nullptr, nullptr);
    if (command == 0) {
      ::sigprocmask(SIG_UNBLOCK, &term, nullptr);
      ::dup2(null_fd.get(), 0);
      ::dup2(out_w.get(), 1);
      ::dup2(err_w.get(), 2);
      ::execve(program.c_str(), args.data(), envp);
    }
    if (command <= 0) {
      const int why = errno;
      (void)!::write(exec_w.get(), &why, sizeof why);
      ::_exit(127);
    }
    ::close(exec_w.get());
    ::close(out_w.get());
    ::close(err_w.get());
    int status = 0;
    while (::waitpid(static_cast<pid_t>(command), &status, 0) < 0 && errno == EINTR) {
    }
    (void)!::write(status_w.get(), &status, sizeof status);
    ::_exit(0);
  }
  if (reporter < 0) {
    outcome.spawn_error = "cannot run " + argv[0] + ": " + std::strerror(errno);
    return c;
  }
  c.pid = static_cast<pid_t>(reporter);
  exec_w.reset();
  status_w.reset();
  int why = 0;
  ssize_t n;
  while ((n = ::read(exec_r.get(), &why, sizeof why)) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof why)) {
    outcome.spawn_error = "cannot run " + argv[0] + ": " + std::strerror(why);
    while (::waitpid(c.pid, nullptr, __WALL) < 0 && errno == EINTR) {
    }
    c.pid = -1;
    return c;
  }
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  c.out = std::move(out_r);
  c.err = std::move(err_r);
  c.status = std::move(status_r);
  return c;
}

void record_exit(ProcessOutcome& o, int status) {
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
}

}  // namespace

std::string ProcessOutcome::failure() const {
  if (!spawn_error.empty()) return spawn_error;
  if (ok()) return "";
  std::string last;
  size_t end = err.find_last_not_of("\n ");
  if (end != std::string::npos) {
    const size_t begin = err.rfind('\n', end);
    last = err.substr(begin == std::string::npos ? 0 : begin + 1,
                      end - (begin == std::string::npos ? 0 : begin + 1) + 1);
  }
  if (timed_out) return "no answer in time" + (last.empty() ? "" : " (" + last + ")");
  if (!last.empty()) return last;
  if (signal != 0) return std::string("killed by signal ") + ::strsignal(signal);
  return "exit status " + std::to_string(exit_code);
}

std::vector<ProcessOutcome> run_processes(const std::vector<std::vector<std::string>>& commands,
                                          int timeout_ms, const std::vector<std::string>* env) {
  std::vector<char*> envp;
  if (env != nullptr) {
    for (const auto& e : *env)
      envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  std::vector<ProcessOutcome> outcomes(commands.size());
  std::vector<Child> children;
  children.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i)
    children.push_back(spawn(commands[i], outcomes[i], env != nullptr ? envp.data() : environ));

  const int64_t term_at = monotonic_ns() + int64_t{timeout_ms} * 1'000'000;
  const int64_t kill_at = term_at + 3'000'000'000;
  bool termed = false;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owners;  // (child, is stdout)
    bool running = false;
    for (auto& c : children) {
      if (c.pid > 0) {
        int status = 0;
        const pid_t r = ::waitpid(c.pid, &status, WNOHANG | __WALL);
        // ECHILD: someone reaped it after all (its status is lost, its
        // output is not).
        if (r == c.pid || (r < 0 && errno == ECHILD)) {
          // The command's status from the reporter; the reporter's own
          // when it died first (the deadline's signals).
          int command_status = 0;
          if (c.status.valid() && ::read(c.status.get(), &command_status, sizeof command_status) ==
                                      static_cast<ssize_t>(sizeof command_status))
            record_exit(*c.outcome, command_status);
          else if (r == c.pid)
            record_exit(*c.outcome, status);
          c.status.reset();
          c.pid = -1;
          // What it wrote before it exited is in the pipes now; a grandchild
          // holding them open must not hold us.
          if (c.out.valid() && drain(c.out, c.outcome->out)) c.out.reset();
          if (c.err.valid() && drain(c.err, c.outcome->err)) c.err.reset();
        } else {
          running = true;
        }
      }
      if (c.out.valid()) {
        fds.push_back({c.out.get(), POLLIN, 0});
        owners.emplace_back(&c, true);
      }
      if (c.err.valid()) {
        fds.push_back({c.err.get(), POLLIN, 0});
        owners.emplace_back(&c, false);
      }
    }
    if (!running && fds.empty()) break;
    const int64_t now = monotonic_ns();
    if (!termed && now >= term_at) {
      termed = true;
      for (auto& c : children) {
        if (c.pid <= 0) continue;
        c.outcome->timed_out = true;
        ::kill(-c.pid, SIGTERM);
      }
    }
    if (termed && now >= kill_at) break;  // the destructors kill and reap the rest
    const int64_t until = termed ? kill_at : term_at;
    // Short polls while a child runs with its pipes closed (nothing to wake us).
    const int wait_ms = static_cast<int>(std::min<int64_t>((until - now) / 1'000'000 + 1, 20));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Child& c = *owners[i].first;
      if (owners[i].second) {
        drain(c.out, c.outcome->out);
      } else {
        drain(c.err, c.outcome->err);
      }
    }
  }
  for (auto& c : children) {
    if (c.pid > 0) c.outcome->timed_out = true;
  }
  return outcomes;
}

}  // namespace egpu
