#include "child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace egpu::test_child {
namespace {

using std::chrono::milliseconds;

ChildOptions shell(const std::string& script) {
  ChildOptions options;
  options.argv = {"/bin/sh", "-c", script};
  return options;
}

TEST(ChildProcess, CapturesStdoutAndExitCode) {
  ChildProcess child(shell("echo hello; echo world; exit 3"));
  const ExitStatus status = child.wait();
  EXPECT_TRUE(status.exited);
  EXPECT_EQ(status.code, 3);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(child.stdout_text(), "hello\nworld\n");
}

TEST(ChildProcess, CapturesStderrSeparately) {
  ChildOptions options = shell("echo out; echo err >&2");
  options.stderr_mode = OutputMode::kCapture;
  ChildProcess child(options);
  EXPECT_TRUE(child.wait().success());
  EXPECT_EQ(child.stdout_text(), "out\n");
  EXPECT_EQ(child.stderr_text(), "err\n");
}

TEST(ChildProcess, PassesExtraEnvironmentAndRemovesNames) {
  setenv("EGPU_CHILD_TEST_REMOVED", "present", 1);
  ChildOptions options = shell("echo \"$EGPU_CHILD_TEST_VALUE-${EGPU_CHILD_TEST_REMOVED:-gone}\"");
  options.env["EGPU_CHILD_TEST_VALUE"] = "set";
  options.unset_env.push_back("EGPU_CHILD_TEST_REMOVED");
  ChildProcess child(options);
  EXPECT_TRUE(child.wait().success());
  EXPECT_EQ(child.stdout_text(), "set-gone\n");
  unsetenv("EGPU_CHILD_TEST_REMOVED");
}

TEST(ChildProcess, WaitForTimesOutThenKillEndsIt) {
  ChildProcess child(shell("exec sleep 30"));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.wait_for(milliseconds(100)).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(100));
  EXPECT_TRUE(child.running());
  child.kill(SIGTERM);
  const auto status = child.wait_for(milliseconds(30000));  // patience for a busy host
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(status->exited);
  EXPECT_EQ(status->signal, SIGTERM);
  EXPECT_EQ(status->describe().rfind("signal 15", 0), 0u) << status->describe();
  EXPECT_FALSE(child.running());
}

TEST(ChildProcess, DestructorKillsAndReapsARunningChild) {
  pid_t pid = 0;
  {
    ChildProcess child(shell("exec sleep 30"));
    pid = child.pid();
    ASSERT_GT(pid, 0);
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  // Reaped: the pid no longer names our child (ESRCH unless reused already).
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(ChildProcess, ExecFailureThrows) {
  ChildOptions options;
  options.argv = {"/nonexistent/egpu-no-such-program"};
  EXPECT_THROW(ChildProcess child(options), std::system_error);
}

TEST(ChildProcess, StdoutOfAChildStillRunningIsReadable) {
  ChildProcess child(shell("echo early; exec sleep 30"));
  // Patience for a busy host: the loop ends as soon as the line is there.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (child.stdout_text().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(child.stdout_text(), "early\n");
  EXPECT_TRUE(child.running());
}

TEST(ChildProcess, InheritEnvFalseGivesOnlyTheGivenEnvironment) {
  setenv("EGPU_CHILD_TEST_INHERITED", "present", 1);
  ChildOptions options =
      shell("echo \"${EGPU_CHILD_TEST_INHERITED:-gone}-$EGPU_CHILD_TEST_VALUE\"");
  options.inherit_env = false;
  options.env["EGPU_CHILD_TEST_VALUE"] = "set";
  ChildProcess child(options);
  EXPECT_TRUE(child.wait().success());
  EXPECT_EQ(child.stdout_text(), "gone-set\n");
  unsetenv("EGPU_CHILD_TEST_INHERITED");
}

TEST(ChildProcess, PipesReadLinesAsTheyComeAndStdinEof) {
  ChildOptions options = shell("echo ready; read line; echo \"got $line\"; cat; printf tail");
  options.stdin_pipe = true;
  options.stdout_mode = OutputMode::kPipe;
  ChildProcess child(options);
  EXPECT_EQ(child.read_line(milliseconds(10000)), "ready");
  // Nothing more until it is fed: the read times out, no sooner.
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.read_line(milliseconds(100)).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(100));
  EXPECT_TRUE(child.running());
  child.close_stdin();  // `read` and `cat` see EOF
  EXPECT_EQ(child.read_rest(milliseconds(10000)), "got \ntail");
  EXPECT_EQ(child.wait_for(milliseconds(10000)), ExitStatus::exited_with(0));
  EXPECT_FALSE(child.read_line(milliseconds(10)).has_value());  // at EOF
  EXPECT_THROW(child.stdout_text(), std::logic_error);
}

TEST(ChildProcess, WaitsForAnExitWithoutReaping) {
  ChildProcess child(shell("exec sleep 30"));
  EXPECT_FALSE(child.wait_exited_unreaped(milliseconds(50)));
  child.kill(SIGKILL);
  ASSERT_TRUE(child.wait_exited_unreaped(milliseconds(10000)));
  // Still a zombie: its pid is ours until it is reaped.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOHANG | WNOWAIT), 0);
  EXPECT_EQ(info.si_pid, child.pid());
  EXPECT_EQ(child.wait_for(milliseconds(10000)), ExitStatus::killed_by(SIGKILL));
}

TEST(ChildProcess, CountsTheCpuTimeOfAReapedChild) {
  ChildProcess child(shell("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"));
  EXPECT_EQ(child.cpu_seconds(), 0);
  EXPECT_TRUE(child.wait_for(milliseconds(60000)).value_or(ExitStatus{}).success());
  EXPECT_GT(child.cpu_seconds(), 0.01);
}

// Every descriptor it opens (pipes, memory files, the pidfd) is closed again,
// whether the child ran or could not be started.
TEST(ChildProcess, LeavesNoDescriptorsOpen) {
  const auto open_descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator{});
  };
  const auto before = open_descriptors();
  {
    ChildOptions options = shell("echo out; echo err >&2");
    options.stdin_pipe = true;
    options.stdout_mode = OutputMode::kPipe;
    options.stderr_mode = OutputMode::kCapture;
    ChildProcess child(options);
    EXPECT_EQ(child.read_line(milliseconds(10000)), "out");
  }
  {
    ChildOptions options;
    options.argv = {"/nonexistent/egpu-no-such-program"};
    options.stderr_mode = OutputMode::kDiscard;
    EXPECT_THROW(ChildProcess child(options), std::system_error);
  }
  EXPECT_EQ(open_descriptors(), before);
}

}  // namespace
}  // namespace egpu::test_child
