#include "stall_monitor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace egpu::harness {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(StallMonitor, OverlapCountsTheAftermathButNothingBefore) {
  const Clock::time_point t0 = Clock::now();
  const std::vector<Stall> stalls = {{t0 + milliseconds(100), t0 + milliseconds(120)}};
  const microseconds aftermath = milliseconds(10);
  // Across, inside, and starting in the aftermath: left out.
  EXPECT_TRUE(overlaps_stall(t0 + milliseconds(95), t0 + milliseconds(125), stalls, aftermath));
  EXPECT_TRUE(overlaps_stall(t0 + milliseconds(105), t0 + milliseconds(110), stalls, aftermath));
  EXPECT_TRUE(overlaps_stall(t0 + milliseconds(129), t0 + milliseconds(131), stalls, aftermath));
  // Done before the stall, or started after the aftermath: kept.
  EXPECT_FALSE(overlaps_stall(t0 + milliseconds(90), t0 + milliseconds(99), stalls, aftermath));
  EXPECT_FALSE(overlaps_stall(t0 + milliseconds(131), t0 + milliseconds(140), stalls, aftermath));
  EXPECT_FALSE(overlaps_stall(t0, t0 + milliseconds(500), {}, aftermath));
}

// A stopped process runs nothing, exactly like a VM whose CPUs the host took:
// the monitor in a child stopped for 60 ms must record a stall that long.
TEST(StallMonitor, RecordsATimeItsProcessDidNotRun) {
  int ready[2];
  int resumed[2];
  int result[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(resumed), 0);
  ASSERT_EQ(pipe(result), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(resumed[1]);  // a parent gone early ends the wait below
    double longest_ms = 0;
    {
      StallMonitor monitor;
      std::this_thread::sleep_for(milliseconds(20));
      char go = 'r';
      (void)!write(ready[1], &go, 1);
      (void)!read(resumed[0], &go, 1);  // stopped and continued meanwhile
      // Until the monitor has seen it (bounded: a monitor that never does
      // fails the case), however late its thread runs.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (longest_ms < 50.0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(10));
        for (const Stall& s : monitor.stalls()) {
          longest_ms = std::max(longest_ms,
                                std::chrono::duration<double, std::milli>(s.to - s.from).count());
        }
      }
    }
    (void)!write(result[1], &longest_ms, sizeof longest_ms);
    _exit(0);
  }
  // A failed assertion below leaves no child behind.
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{child};
  char go = 0;
  ASSERT_EQ(read(ready[0], &go, 1), 1);
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  std::this_thread::sleep_for(milliseconds(60));
  ASSERT_EQ(kill(child, SIGCONT), 0);
  ASSERT_EQ(write(resumed[1], &go, 1), 1);
  double longest_ms = 0;
  ASSERT_EQ(read(result[0], &longest_ms, sizeof longest_ms),
            static_cast<ssize_t>(sizeof longest_ms));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  reaper.reaped = true;
  EXPECT_GE(longest_ms, 50.0);
  for (int fd : {ready[0], ready[1], resumed[0], resumed[1], result[0], result[1]})
    close(fd);
}

}  // namespace
}  // namespace egpu::harness
