// egpuctl's child processes (the Slurm relay): output, exit status, failures
// to start, and the deadline.
#include "core/util/subprocess.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

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

TEST(Subprocess, ASignalledChildSaysSo) {
  auto r = run_processes({{"sh", "-c", "kill -KILL $$"}}, 30'000);
  EXPECT_EQ(r[0].signal, 9);
  EXPECT_NE(r[0].failure().find("signal"), std::string::npos) << r[0].failure();
}

TEST(Subprocess, PastTheDeadlineChildrenAreEndedAndReported) {
  // The child never ends by itself: only the deadline ends it.
  auto r = run_processes({{"sh", "-c", "echo started; exec sleep infinity"}, {"true"}}, 300);
  EXPECT_TRUE(r[0].timed_out);
  EXPECT_EQ(r[0].out, "started\n");
  EXPECT_NE(r[0].failure().find("no answer in time"), std::string::npos);
  EXPECT_TRUE(r[1].ok());
}

TEST(Subprocess, AChildIgnoringTermIsKilled) {
  auto r = run_processes({{"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}}, 200);
  EXPECT_TRUE(r[0].timed_out);
}

}  // namespace
}  // namespace egpu
