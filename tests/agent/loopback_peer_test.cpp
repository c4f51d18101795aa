// loopback_peer_uid: the owner of a loopback TCP client, from sock_diag.
#include "nodeagent/loopback_peer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

UniqueFd connect_to(const sockaddr_storage& addr, socklen_t len) {
  UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) return {};
  return fd;
}

TEST(LoopbackPeer, NamesTheUserOfAnIpv4AndAnIpv6Client) {
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
    auto uid = loopback_peer_uid(accepted.get());
    ASSERT_TRUE(uid.ok()) << uid.error();
    EXPECT_EQ(*uid, geteuid());
  }
}

// The client's owner, not the listener's: a connection made by another
// user is named as that user's.
TEST(LoopbackPeer, NamesAnotherUsersClientAsTheirs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play another uid";
  sockaddr_storage addr{};
  socklen_t len = 0;
  UniqueFd lis = listener(AF_INET, &addr, &len);
  ASSERT_TRUE(lis.valid());
  int done[2];
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(2);
    UniqueFd c = connect_to(addr, len);
    if (!c.valid()) _exit(3);
    char b;
    (void)!::read(done[0], &b, 1);  // held until the parent has looked
    _exit(0);
  }
  UniqueFd accepted(::accept4(lis.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  auto uid = loopback_peer_uid(accepted.get());
  (void)!::write(done[1], "x", 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(done[0]);
  ::close(done[1]);
  ASSERT_TRUE(uid.ok()) << uid.error();
  EXPECT_EQ(*uid, 65534u);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(LoopbackPeer, ANonTcpDescriptorIsAnError) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd a(pair[0]);
  UniqueFd b(pair[1]);
  auto uid = loopback_peer_uid(a.get());
  ASSERT_FALSE(uid.ok());
  EXPECT_NE(uid.error().find("not an IPv4 or IPv6 connection"), std::string::npos) << uid.error();
  auto closed = loopback_peer_uid(-1);
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.error().find("getsockname"), std::string::npos) << closed.error();
}

}  // namespace
}  // namespace egpu::agent
