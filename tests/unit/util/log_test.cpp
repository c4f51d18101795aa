// The agent's log: one line per message, whatever its values hold.
#include "core/util/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace egpu {
namespace {

// What log::write puts on stderr for one message.
std::string logged(const char* value) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(pipe_fds[1], STDERR_FILENO);
  ::close(pipe_fds[1]);
  log::init("egpu-test", false, log::Level::kInfo);
  EGPU_LOG_WARN("process 7 (%s) uses the GPU", value);
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  return out;
}

TEST(Log, AValueCannotStartALineOfItsOwn) {
  const std::string out = logged("x\nFORGED egpu-agentd[error]: \r\x1b[2Jgone\x7f");
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // the one at the end
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x7f'), std::string::npos) << out;
  EXPECT_NE(out.find("(x?FORGED egpu-agentd[error]: ??[2Jgone?) uses the GPU"), std::string::npos)
      << out;
  // Tabs and everything printable are kept.
  EXPECT_NE(logged("a\tb é").find("(a\tb é)"), std::string::npos);
}

}  // namespace
}  // namespace egpu
