#include "child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <system_error>
#include <thread>

namespace egpu::harness {
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
  setenv("EGPU_HARNESS_TEST_REMOVED", "present", 1);
  ChildOptions options =
      shell("echo \"$EGPU_HARNESS_TEST_VALUE-${EGPU_HARNESS_TEST_REMOVED:-gone}\"");
  options.env["EGPU_HARNESS_TEST_VALUE"] = "set";
  options.unset_env.push_back("EGPU_HARNESS_TEST_REMOVED");
  ChildProcess child(options);
  EXPECT_TRUE(child.wait().success());
  EXPECT_EQ(child.stdout_text(), "set-gone\n");
  unsetenv("EGPU_HARNESS_TEST_REMOVED");
}

TEST(ChildProcess, WaitForTimesOutThenKillEndsIt) {
  ChildProcess child(shell("exec sleep 30"));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.wait_for(milliseconds(100)).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(100));
  EXPECT_TRUE(child.running());
  child.kill(SIGTERM);
  const auto status = child.wait_for(milliseconds(5000));
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (child.stdout_text().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(child.stdout_text(), "early\n");
  EXPECT_TRUE(child.running());
}

}  // namespace
}  // namespace egpu::harness
