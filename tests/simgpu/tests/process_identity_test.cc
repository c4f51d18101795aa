// current_pid(): the cached getpid() the device lock records as its holder.
#include "model/process_identity.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace egpu::simgpu {
namespace {

TEST(ProcessIdentity, CachedPidIsThisProcessAlsoAfterFork) {
  ASSERT_EQ(current_pid(), ::getpid());
  // A child forked after the cache is filled must see its own pid, or a lock
  // it takes would name its parent as the holder (and a dead child's lock
  // would look held by a live process).
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int32_t seen[2] = {current_pid(), static_cast<int32_t>(::getpid())};
    const bool written = ::write(pipe_fds[1], seen, sizeof seen) == sizeof seen;
    ::_exit(written ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  int32_t seen[2] = {0, 0};
  EXPECT_EQ(::read(pipe_fds[0], seen, sizeof seen), static_cast<ssize_t>(sizeof seen));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(seen[1], child);
  EXPECT_EQ(seen[0], seen[1]) << "the child's cached pid is its parent's";
  EXPECT_EQ(current_pid(), ::getpid());
}

}  // namespace
}  // namespace egpu::simgpu
