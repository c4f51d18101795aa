// The user behind a loopback TCP connection. Unix sockets have SO_PEERCRED;
// TCP has nothing like it, but on one host the kernel knows the peer's
// socket and its owner: sock_diag (the netlink interface `ss` uses) looks
// the client's end up by its address and port and reports its uid. The
// metrics endpoint uses it to bound each user's share of its connections.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::agent {

class LoopbackPeers {
 public:
  // Opens sock_diag and checks that it names this process as the owner of
  // a loopback client it connects itself: a host without it (no inet_diag
  // module, a seccomp filter) fails here, naming why, rather than at each
  // connection.
  static Result<LoopbackPeers> open();

  // The owner of the client end of `fd`, an accepted TCP connection from
  // this host. Fails naming why: not TCP over IPv4/IPv6, the client gone
  // (closed, TIME_WAIT: no owner any more), no answer.
  Result<uid_t> uid_of(int fd);

 private:
  explicit LoopbackPeers(UniqueFd netlink) : netlink_(std::move(netlink)) {}
  UniqueFd netlink_;
  uint32_t seq_ = 0;
};

}  // namespace egpu::agent
