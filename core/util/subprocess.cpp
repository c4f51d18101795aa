#include "core/util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/util/clock.h"
#include "core/util/reported_spawn.h"
#include "core/util/unique_fd.h"

extern char** environ;

namespace egpu {
namespace {

// A started child; the destructor kills and reaps one still running, so no
// path out of run_processes leaves a process behind.
struct Child {
  pid_t pid = -1;  // the reporter (reported_spawn.h)
  std::string name;
  UniqueFd out, err;
  UniqueFd status;  // the reporter's report
  ProcessOutcome* outcome = nullptr;

  Child() = default;
  Child(Child&& o) noexcept
      : pid(std::exchange(o.pid, -1)),
        name(std::move(o.name)),
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

// Reads what is there now, up to kMaxReadsPerDrain reads; false at end of
// file, on an error, or once kMaxCapture is held (the pipe is then closed:
// what the command writes past it is not read). The bound lets the caller
// look at its deadline: writers that keep a pipe full (the command's, or
// anyone's who can open its pipe) would otherwise keep it here.
bool drain(UniqueFd& fd, std::string& into) {
  constexpr int kMaxReadsPerDrain = 64;
  char buf[16384];
  for (int reads = 0; reads < kMaxReadsPerDrain; ++reads) {
    if (into.size() >= kMaxCapture) {
      fd.reset();
      return false;
    }
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      into.append(buf, std::min(kMaxCapture - into.size(), static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    fd.reset();
    return false;
  }
  return true;
}

// Spawns one command with stdout and stderr on pipes, under a reporter
// (reported_spawn.h); fills outcome's spawn_error instead when it cannot.
Child spawn(const std::vector<std::string>& argv, ProcessOutcome& outcome, char* const* envp) {
  Child c;
  c.outcome = &outcome;
  c.name = argv.empty() ? std::string() : argv[0];
  auto started = spawn_reported(argv, envp);
  if (!started) {
    outcome.spawn_error = started.error();
    return c;
  }
  c.pid = started->reporter;
  c.out = std::move(started->out);
  c.err = std::move(started->err);
  c.status = std::move(started->report);
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
        // Has the reporter ended? Looked at without reaping it, so that its
        // group (the command's too) can still be killed when it ended
        // without a report (killed alone: the OOM killer counts all of this
        // process's copied memory against it).
        siginfo_t info{};
        const int w =
            ::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT | __WALL);
        const bool lost = w < 0 && errno == ECHILD;  // reaped by someone else
        if (lost || (w == 0 && info.si_pid == c.pid)) {
          const auto report = c.status.valid() ? read_report(c.status) : Error{"none"};
          if (!report) ::kill(-c.pid, SIGKILL);
          int status = 0;
          if (!lost) {
            while (::waitpid(c.pid, &status, __WALL) < 0 && errno == EINTR) {
            }
          }
          if (report && report->started)
            record_exit(*c.outcome, report->wait_status);
          else if (report)
            c.outcome->spawn_error =
                "cannot run " + c.name + ": " + std::strerror(report->exec_errno);
          else if (!c.outcome->timed_out)
            c.outcome->spawn_error =
                "lost " + c.name + ": the process watching it ended first (" +
                (WIFSIGNALED(status) ? std::string("signal ") + ::strsignal(WTERMSIG(status))
                                     : "exit " + std::to_string(WEXITSTATUS(status))) +
                ")";
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
