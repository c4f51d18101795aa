#include "core/util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/util/clock.h"
#include "core/util/unique_fd.h"

extern char** environ;

namespace egpu {
namespace {

// A started child; the destructor kills and reaps one still running, so no
// path out of run_processes leaves a process behind.
struct Child {
  pid_t pid = -1;
  UniqueFd out, err;
  ProcessOutcome* outcome = nullptr;

  Child() = default;
  Child(Child&& o) noexcept
      : pid(std::exchange(o.pid, -1)),
        out(std::move(o.out)),
        err(std::move(o.err)),
        outcome(o.outcome) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);  // its group: what it started too
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
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

// Spawns one command with stdout and stderr on pipes; fills outcome's
// spawn_error instead when it cannot.
Child spawn(const std::vector<std::string>& argv, ProcessOutcome& outcome, char* const* envp) {
  Child c;
  c.outcome = &outcome;
  int out_pipe[2], err_pipe[2];
  if (argv.empty()) {
    outcome.spawn_error = "empty command";
    return c;
  }
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    outcome.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    outcome.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, to end it whole
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    outcome.spawn_error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return c;
  }
  c.pid = pid;
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  c.out = std::move(out_r);
  c.err = std::move(err_r);
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
        const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
        // ECHILD: SIGCHLD is ignored here and the kernel reaped it already
        // (its status is lost, its output is not).
        if (r == c.pid || (r < 0 && errno == ECHILD)) {
          if (r == c.pid) record_exit(*c.outcome, status);
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
