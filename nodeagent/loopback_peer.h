// The user behind a loopback TCP connection. Unix sockets have SO_PEERCRED;
// TCP has nothing like it, but on one host the kernel knows the peer's
// socket and its owner: sock_diag (the netlink interface `ss` uses) looks
// the client's end up by its address and port and reports its uid. The
// metrics endpoint uses it to bound each user's share of its connections.
#pragma once

#include <sys/types.h>

#include "core/util/result.h"

namespace egpu::agent {

// `fd`: an accepted TCP connection whose peer is on this host (a loopback
// listener's). Fails naming why: not TCP over IPv4/IPv6, sock_diag not
// available (no inet_diag module, a seccomp filter), the peer already gone.
Result<uid_t> loopback_peer_uid(int fd);

}  // namespace egpu::agent
