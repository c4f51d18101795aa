// egpuctl's child processes (the Slurm relay): output, exit status, failures
// to start, and the deadline.
#include "core/util/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace egpu {
namespace {

// Whether process `pid` is gone, or a zombie on its way, within 5 s.
bool gone_within_5s(int pid) {
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  for (int i = 0; i < 500; ++i) {
    std::ifstream in(stat);
    std::string id, name, state;
    if (!(in >> id >> name >> state) || state == "Z") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Subprocess, CollectsOutputAndStatusOfEachInOrder) {
  auto r =
      run_processes({{"sh", "-c", "echo out; echo err >&2; exit 3"}, {"echo", "hello"}}, 30'000);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].out, "out\n");
  EXPECT_EQ(r[0].err, "err\n");
  EXPECT_EQ(r[0].exit_code, 3);
  EXPECT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].failure(), "err");
  EXPECT_TRUE(r[1].ok());
  EXPECT_EQ(r[1].out, "hello\n");
  EXPECT_EQ(r[1].failure(), "");
}

TEST(Subprocess, LargeOutputOfBothStreamsDoesNotDeadlock) {
  // More than a pipe holds on each stream at once.
  auto r = run_processes({{"sh", "-c", "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"}},
                         30'000);
  ASSERT_TRUE(r[0].ok()) << r[0].failure();
  EXPECT_EQ(r[0].out.size(), 300000u);
  EXPECT_EQ(r[0].err.size(), 300000u);
}

TEST(Subprocess, AMissingProgramIsNamed) {
  auto r = run_processes({{"egpu-no-such-program-here"}}, 30'000);
  EXPECT_FALSE(r[0].ok());
  EXPECT_NE(r[0].failure().find("cannot run egpu-no-such-program-here"), std::string::npos)
      << r[0].failure();
}

TEST(Subprocess, AFileThatCannotRunIsNamed) {
  char path[] = "/tmp/egpu-not-a-program-XXXXXX";
  const int fd = ::mkstemp(path);  // mode 0600: no one may execute it
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto r = run_processes({{path}}, 30'000);
  ::unlink(path);
  EXPECT_FALSE(r[0].ok());
  EXPECT_NE(r[0].failure().find(std::string("cannot run ") + path + ": Permission denied"),
            std::string::npos)
      << r[0].failure();
}

// slurmstepd's main thread reaps any child of its own (wait3(-1)) while the
// SPANK checkpoint thread runs scontrol: the status must still be ours.
TEST(Subprocess, AnotherThreadReapingAnyChildDoesNotTakeTheStatus) {
  std::atomic<bool> stop{false};
  std::atomic<int> stolen{0};
  std::thread reaper([&] {
    while (!stop.load()) {
      const pid_t r = ::waitpid(-1, nullptr, 0);
      if (r > 0) stolen.fetch_add(1);
      if (r < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (int i = 0; i < 20; ++i) {
    auto r = run_processes({{"sh", "-c", "echo x; exit 3"}}, 30'000);
    EXPECT_EQ(r[0].exit_code, 3) << r[0].failure();
    EXPECT_EQ(r[0].out, "x\n");
  }
  stop.store(true);
  reaper.join();
  EXPECT_EQ(stolen.load(), 0);
}

// The status stays right when the caller ignores SIGCHLD (the kernel would
// reap the command itself), and the command gets no descriptor of the
// caller's but its stdio.
TEST(Subprocess, TheCallersSignalsAndDescriptorsDoNotReachTheCommand) {
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGCHLD, &ignore, &before), 0);
  const int leaked = ::open("/dev/null", O_RDONLY);  // not close-on-exec
  ASSERT_GE(leaked, 3);
  auto r = run_processes({{"sh", "-c", "ls /proc/$$/fd; exit 4"}}, 30'000);
  ::close(leaked);
  ::sigaction(SIGCHLD, &before, nullptr);
  EXPECT_EQ(r[0].exit_code, 4) << r[0].failure();
  EXPECT_EQ(r[0].out, "0\n1\n2\n") << r[0].out;
}

// A caller whose stdio is closed: the pipes may take descriptors 0-2.
TEST(Subprocess, ACallerWithoutStdioStillGetsTheOutput) {
  const int saved_out = ::dup(1), saved_err = ::dup(2), saved_in = ::dup(0);
  ::close(0);
  ::close(1);
  ::close(2);
  auto r = run_processes({{"sh", "-c", "echo out; echo err >&2; read x || echo eof"}}, 30'000);
  ::dup2(saved_in, 0);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_in);
  ::close(saved_out);
  ::close(saved_err);
  EXPECT_TRUE(r[0].ok()) << r[0].failure();
  EXPECT_EQ(r[0].out, "out\neof\n");
  EXPECT_EQ(r[0].err, "err\n");
}

// egpuctl run as root relays through `runuser -u USER -- srun ...`, which
// keeps root's session: a command that kept the caller's controlling
// terminal could open /dev/tty and type into root's shell (TIOCSTI). Run
// from a process whose controlling terminal is a pty of its own, the
// command has none: /dev/tty cannot be opened.
TEST(Subprocess, TheCommandHasNoControllingTerminal) {
  const pid_t caller = fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 || setsid() < 0) _exit(10);
    const char* name = ptsname(master);
    const int pty = name != nullptr ? ::open(name, O_RDWR) : -1;  // becomes the terminal
    if (pty < 0 || ::open("/dev/tty", O_RDWR) < 0) _exit(11);     // it is ours
    auto r = run_processes({{"sh", "-c", "exec 3</dev/tty && echo reached"}}, 30'000);
    if (r[0].out.find("reached") != std::string::npos) _exit(1);
    _exit(r[0].exit_code > 0 ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(caller, &status, 0), caller);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_NE(WEXITSTATUS(status), 10) << "no pty here: nothing to test";
  ASSERT_NE(WEXITSTATUS(status), 11) << "the pty did not become the terminal: nothing to test";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the command opened the caller's terminal";
}

// The process that watches the command dies alone (the OOM killer's
// choice): the command goes too, and the outcome says it was lost, not how
// the watcher ended.
TEST(Subprocess, ACommandWhoseWatcherDiedIsEndedAndReportedLost) {
  auto r = run_processes({{"sh", "-c", "echo $$; kill -KILL $PPID; sleep 30"}}, 60'000);
  EXPECT_FALSE(r[0].ok());
  EXPECT_NE(r[0].failure().find("lost sh: the process watching it ended first (signal Killed)"),
            std::string::npos)
      << r[0].failure();
  const int pid = std::atoi(r[0].out.c_str());
  ASSERT_GT(pid, 0) << r[0].out;
  EXPECT_TRUE(gone_within_5s(pid)) << "process " << pid << " is still running";
}

TEST(Subprocess, ASignalledChildSaysSo) {
  auto r = run_processes({{"sh", "-c", "kill -KILL $$"}}, 30'000);
  EXPECT_EQ(r[0].signal, 9);
  EXPECT_NE(r[0].failure().find("signal"), std::string::npos) << r[0].failure();
}

TEST(Subprocess, PastTheDeadlineChildrenAreEndedAndReported) {
  // The child never ends by itself: only the deadline ends it.
  // The deadline includes starting them (and the echo): generous for a
  // loaded machine, and the test takes that long.
  auto r = run_processes({{"sh", "-c", "echo started; exec sleep infinity"}, {"true"}}, 10'000);
  EXPECT_TRUE(r[0].timed_out);
  EXPECT_EQ(r[0].out, "started\n");
  EXPECT_NE(r[0].failure().find("no answer in time"), std::string::npos);
  EXPECT_TRUE(r[1].ok());
}

TEST(Subprocess, AChildIgnoringTermIsKilled) {
  // Long enough for a loaded machine to print the pid and set the trap.
  auto r =
      run_processes({{"sh", "-c", "echo $$; trap '' TERM; while :; do sleep 1; done"}}, 10'000);
  EXPECT_TRUE(r[0].timed_out);
  // Not left running.
  const int pid = std::atoi(r[0].out.c_str());
  ASSERT_GT(pid, 0) << r[0].out;
  EXPECT_TRUE(gone_within_5s(pid)) << "process " << pid << " is still running";
}

// A command that writes without end past the capture was read (and its
// output thrown away) until the deadline, and a writer that kept the pipe
// full kept the reader from looking at the deadline at all. Past the
// capture its pipe is closed: it ends by SIGPIPE, long before a deadline,
// also where the caller ignores SIGPIPE (systemd's units, slurmstepd).
TEST(Subprocess, OutputPastTheCaptureClosesThePipe) {
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &before), 0);
  auto r = run_processes({{"sh", "-c", "exec yes"}}, 120'000);
  ::sigaction(SIGPIPE, &before, nullptr);
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_EQ(r[0].signal, SIGPIPE);
  EXPECT_EQ(r[0].out.size(), kMaxCapture);
}

}  // namespace
}  // namespace egpu
