#include "nodeagent/loopback_peer.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace egpu::agent {
namespace {

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Copies one side's port and address into sock_diag's id, both in network order.
void put(const sockaddr_storage& a, __be16* port, __be32* addr) {
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    *port = v4.sin_port;
    std::memcpy(addr, &v4.sin_addr, sizeof v4.sin_addr);
  } else {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    *port = v6.sin6_port;
    std::memcpy(addr, &v6.sin6_addr, sizeof v6.sin6_addr);
  }
}

// The peer's end as sock_diag names it: its own address and port are the
// source, ours the destination.
Result<inet_diag_req_v2> request_for(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_len = sizeof local;
  socklen_t peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0)
    return Error{errno_text("getsockname")};
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
    return Error{errno_text("getpeername")};
  if (local.ss_family != peer.ss_family ||
      (local.ss_family != AF_INET && local.ss_family != AF_INET6)) {
    return Error{"not an IPv4 or IPv6 connection"};
  }
  inet_diag_req_v2 req{};
  req.sdiag_family = static_cast<uint8_t>(local.ss_family);
  req.sdiag_protocol = IPPROTO_TCP;
  req.idiag_states = ~0u;
  // The loopback device: it matches a client bound to it (SO_BINDTODEVICE
  // needs no privilege) as well as an unbound one; 0 would miss the former.
  req.id.idiag_if = ::if_nametoindex("lo");
  req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  put(peer, &req.id.idiag_sport, req.id.idiag_src);
  put(local, &req.id.idiag_dport, req.id.idiag_dst);
  return req;
}

// A loopback client of this process's own, for open()'s check.
Result<uid_t> check(LoopbackPeers& peers) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!listener.valid() || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Error{errno_text("a loopback listener to check sock_diag with")};
  }
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!client.valid() || ::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return Error{errno_text("a loopback client to check sock_diag with")};
  UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!accepted.valid()) return Error{errno_text("accepting the check's client")};
  return peers.uid_of(accepted.get());
}

}  // namespace

Result<LoopbackPeers> LoopbackPeers::open() {
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return Error{errno_text("sock_diag socket")};
  // The kernel answers at once; a bound keeps a wedged netlink from
  // stalling the event loop.
  const timeval limit{0, 100'000};
  ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  LoopbackPeers peers(std::move(nl));
  auto uid = check(peers);
  if (!uid) return Error{uid.error()};
  if (*uid != ::geteuid()) {
    return Error{"sock_diag named uid " + std::to_string(*uid) + " for a client of uid " +
                 std::to_string(::geteuid())};
  }
  return peers;
}

Result<uid_t> LoopbackPeers::uid_of(int fd) {
  auto req = request_for(fd);
  if (!req) return Error{req.error()};
  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } msg{};
  msg.header.nlmsg_len = sizeof msg;
  msg.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.header.nlmsg_flags = NLM_F_REQUEST;
  msg.header.nlmsg_seq = ++seq_;
  msg.body = *req;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(netlink_.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof msg)) {
    return Error{errno_text("sock_diag request")};
  }
  // A reply to an earlier request that timed out may come first: skipped.
  for (int reads = 0; reads < 4; ++reads) {
    alignas(nlmsghdr) char buf[8192];
    sockaddr_nl from{};
    socklen_t from_len = sizeof from;
    const ssize_t n = ::recvfrom(netlink_.get(), buf, sizeof buf, 0,
                                 reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) return Error{errno_text("sock_diag reply")};
    if (from.nl_pid != 0) continue;  // not the kernel's
    int left = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_seq != seq_) continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return Error{"sock_diag: short error"};
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        return Error{std::string("sock_diag: ") + std::strerror(-e->error)};
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
        return Error{"sock_diag: short reply"};
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      // The socket asked for, not another of the same family.
      if (m->id.idiag_sport != req->id.idiag_sport || m->id.idiag_dport != req->id.idiag_dport)
        return Error{"sock_diag: another socket answered"};
      // A closed client (TIME_WAIT, or an orphan) has no owner: its uid reads 0.
      if (m->idiag_state == TCP_TIME_WAIT || m->idiag_inode == 0)
        return Error{"the client has closed its end"};
      return static_cast<uid_t>(m->idiag_uid);
    }
  }
  return Error{"sock_diag: no answer for the peer"};
}

}  // namespace egpu::agent
