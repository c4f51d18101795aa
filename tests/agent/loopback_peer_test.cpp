// LoopbackPeers: the owner of a loopback TCP client, from sock_diag.
#include "nodeagent/loopback_peer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "core/util/unique_fd.h"

namespace egpu::agent {
namespace {

// A listener on an ephemeral loopback port of `family`; invalid when the
// host has no such loopback (IPv6 off).
UniqueFd listener(int family, sockaddr_storage* addr, socklen_t* len) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return {};
  *addr = {};
  if (family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(addr);
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *len = sizeof *v4;
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(addr);
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_loopback;
    *len = sizeof *v6;
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(addr), *len) != 0 ||
      ::listen(fd.get(), 4) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(addr), len) != 0) {
    return {};
  }
  return fd;
}

// A client, bound to the loopback device first when `bind_lo` (any user
// may: it hides the socket from a sock_diag lookup on no device).
UniqueFd connect_to(const sockaddr_storage& addr, socklen_t len, bool bind_lo = false) {
  UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (bind_lo && ::setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, "lo", 3) != 0) return {};
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) return {};
  return fd;
}

// sock_diag is there wherever `ss -e` works; the agent checks it at start.
LoopbackPeers peers() {
  auto p = LoopbackPeers::open();
  if (!p) ADD_FAILURE() << p.error();
  return std::move(*p);
}

TEST(LoopbackPeer, NamesTheUserOfAnIpv4AndAnIpv6Client) {
  LoopbackPeers diag = peers();
  for (int family : {AF_INET, AF_INET6}) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    UniqueFd lis = listener(family, &addr, &len);
    if (!lis.valid() && family == AF_INET6) continue;  // no IPv6 loopback here
    ASSERT_TRUE(lis.valid()) << family;
    UniqueFd client = connect_to(addr, len);
    ASSERT_TRUE(client.valid());
    UniqueFd accepted(::accept4(lis.get(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(accepted.valid());
    auto uid = diag.uid_of(accepted.get());
    ASSERT_TRUE(uid.ok()) << uid.error();
    EXPECT_EQ(*uid, geteuid());
  }
}

// A client that has closed its end has no owner left (TIME_WAIT reads uid
// 0, which must not pass for root).
TEST(LoopbackPeer, AClosedClientIsNoUser) {
  LoopbackPeers diag = peers();
  sockaddr_storage addr{};
  socklen_t len = 0;
  UniqueFd lis = listener(AF_INET, &addr, &len);
  ASSERT_TRUE(lis.valid());
  UniqueFd client = connect_to(addr, len);
  ASSERT_TRUE(client.valid());
  UniqueFd accepted(::accept4(lis.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  client.reset();
  auto uid = diag.uid_of(accepted.get());
  ASSERT_FALSE(uid.ok()) << "uid " << *uid;
}

// The client's owner, not the listener's: a connection made by another
// user is named as that user's, bound to the loopback device or not.
TEST(LoopbackPeer, NamesAnotherUsersClientAsTheirs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  LoopbackPeers diag = peers();
  for (bool bind_lo : {false, true}) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    UniqueFd lis = listener(AF_INET, &addr, &len);
    ASSERT_TRUE(lis.valid());
    int done[2];
    ASSERT_EQ(::pipe(done), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(2);
      // As the user: the socket's owner is who creates it.
      UniqueFd c = connect_to(addr, len, bind_lo);
      if (!c.valid()) _exit(errno == EPERM ? 6 : 3);
      char b;
      (void)!::read(done[0], &b, 1);  // held until the parent has looked
      _exit(0);
    }
    pollfd ready{lis.get(), POLLIN, 0};
    if (::poll(&ready, 1, 60'000) != 1) {  // the child could not connect: see its status
      ::kill(child, SIGKILL);
    }
    UniqueFd accepted(ready.revents & POLLIN ? ::accept4(lis.get(), nullptr, nullptr, SOCK_CLOEXEC)
                                             : -1);
    auto uid = accepted.valid() ? diag.uid_of(accepted.get()) : Result<uid_t>(Error{"no client"});
    (void)!::write(done[1], "x", 1);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::close(done[0]);
    ::close(done[1]);
    if (bind_lo && WIFEXITED(status) && WEXITSTATUS(status) == 6) {
      continue;  // before Linux 5.7 users cannot bind to a device: nothing to hide behind
    }
    ASSERT_TRUE(uid.ok()) << (bind_lo ? "bound to lo: " : "") << uid.error();
    EXPECT_EQ(*uid, 65534u) << (bind_lo ? "bound to lo" : "");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
  }
}

TEST(LoopbackPeer, ANonTcpDescriptorIsAnError) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd a(pair[0]);
  UniqueFd b(pair[1]);
  LoopbackPeers diag = peers();
  auto uid = diag.uid_of(a.get());
  ASSERT_FALSE(uid.ok());
  EXPECT_NE(uid.error().find("not an IPv4 or IPv6 connection"), std::string::npos) << uid.error();
  auto closed = diag.uid_of(-1);
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.error().find("getsockname"), std::string::npos) << closed.error();
}

}  // namespace
}  // namespace egpu::agent
