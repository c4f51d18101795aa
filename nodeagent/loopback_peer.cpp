#include "nodeagent/loopback_peer.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/util/unique_fd.h"

namespace egpu::agent {
namespace {

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
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
  if (local.ss_family != peer.ss_family) return Error{"mixed address families"};
  inet_diag_req_v2 req{};
  req.sdiag_family = static_cast<uint8_t>(local.ss_family);
  req.sdiag_protocol = IPPROTO_TCP;
  req.idiag_states = ~0u;
  req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (local.ss_family == AF_INET) {
    const auto& l = reinterpret_cast<const sockaddr_in&>(local);
    const auto& p = reinterpret_cast<const sockaddr_in&>(peer);
    req.id.idiag_sport = p.sin_port;
    req.id.idiag_dport = l.sin_port;
    std::memcpy(req.id.idiag_src, &p.sin_addr, sizeof p.sin_addr);
    std::memcpy(req.id.idiag_dst, &l.sin_addr, sizeof l.sin_addr);
  } else if (local.ss_family == AF_INET6) {
    const auto& l = reinterpret_cast<const sockaddr_in6&>(local);
    const auto& p = reinterpret_cast<const sockaddr_in6&>(peer);
    req.id.idiag_sport = p.sin6_port;
    req.id.idiag_dport = l.sin6_port;
    std::memcpy(req.id.idiag_src, &p.sin6_addr, sizeof p.sin6_addr);
    std::memcpy(req.id.idiag_dst, &l.sin6_addr, sizeof l.sin6_addr);
  } else {
    return Error{"not an IPv4 or IPv6 connection"};
  }
  return req;
}

}  // namespace

Result<uid_t> loopback_peer_uid(int fd) {
  auto req = request_for(fd);
  if (!req) return Error{req.error()};
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return Error{errno_text("sock_diag socket")};
  // The kernel answers at once; a bound keeps a wedged netlink from
  // stalling the event loop.
  const timeval limit{0, 100'000};
  ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } msg{};
  msg.header.nlmsg_len = sizeof msg;
  msg.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.header.nlmsg_flags = NLM_F_REQUEST;
  msg.header.nlmsg_seq = 1;
  msg.body = *req;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof msg)) {
    return Error{errno_text("sock_diag request")};
  }
  alignas(nlmsghdr) char buf[8192];
  sockaddr_nl from{};
  socklen_t from_len = sizeof from;
  const ssize_t n =
      ::recvfrom(nl.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
  if (n < 0) return Error{errno_text("sock_diag reply")};
  if (from.nl_pid != 0) return Error{"sock_diag: a reply not from the kernel"};
  int left = static_cast<int>(n);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_seq != 1) continue;
    if (h->nlmsg_type == NLMSG_ERROR) {
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return Error{"sock_diag: short error"};
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      return Error{std::string("sock_diag: ") + std::strerror(-e->error)};
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) return Error{"sock_diag: short reply"};
    const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    // The socket asked for, not another of the same family.
    if (m->id.idiag_sport != req->id.idiag_sport || m->id.idiag_dport != req->id.idiag_dport)
      return Error{"sock_diag: another socket answered"};
    return static_cast<uid_t>(m->idiag_uid);
  }
  return Error{"sock_diag: no answer for the peer"};
}

}  // namespace egpu::agent
