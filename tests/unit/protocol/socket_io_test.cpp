// The socket calls under the control client where the Unix socket cannot show
// them: a connect that is still in progress when connect(2) returns, whose
// outcome only SO_ERROR tells (TCP on loopback behaves so), and the deadline's
// rounding.
#include "core/protocol/socket_io.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <string>

namespace egpu::protocol {
namespace {

// A loopback port that is bound, so no one else takes it, and not listening.
struct ClosedPort {
  UniqueFd holder{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_in addr{};
  ClosedPort() {
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(holder.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    EXPECT_EQ(getsockname(holder.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
};

UniqueFd nonblocking_tcp_socket() {
  return UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

TEST(SocketIo, ARefusedConnectInProgressIsReadFromSoError) {
  ClosedPort port;
  {
    // Where connect(2) already says no, the SO_ERROR path is not reached.
    UniqueFd probe = nonblocking_tcp_socket();
    if (::connect(probe.get(), port.sa(), sizeof port.addr) == 0 || errno != EINPROGRESS) {
      GTEST_SKIP() << "loopback connects do not stay in progress here";
    }
  }
  UniqueFd fd = nonblocking_tcp_socket();
  const Status s = connect_by(fd.get(), port.sa(), sizeof port.addr, Deadline::after_ms(2000));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("Connection refused"), std::string::npos) << s.error();
}

TEST(SocketIo, AnAcceptedConnectInProgressSucceeds) {
  ClosedPort port;
  ASSERT_EQ(listen(port.holder.get(), 1), 0);
  UniqueFd fd = nonblocking_tcp_socket();
  const Status s = connect_by(fd.get(), port.sa(), sizeof port.addr, Deadline::after_ms(2000));
  EXPECT_TRUE(s.ok()) << s.error();
}

TEST(Deadline, PollTimeoutRoundsUpAndEndsAtZero) {
  // A poll for the time given never ends before the deadline.
  const Deadline soon(monotonic_ns() + 1'500'000);
  const int timeout_ms = soon.poll_timeout_ms();
  EXPECT_GE(int64_t{timeout_ms} * 1'000'000, soon.at_ns() - monotonic_ns());
  const Deadline gone = Deadline::after_ms(-1);
  EXPECT_EQ(gone.poll_timeout_ms(), 0);
  EXPECT_TRUE(gone.passed());
  const Deadline far(INT64_MAX);
  EXPECT_EQ(far.poll_timeout_ms(), INT_MAX);
}

}  // namespace
}  // namespace egpu::protocol
