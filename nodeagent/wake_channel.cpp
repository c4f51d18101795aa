#include "nodeagent/wake_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace egpu::agent {

Result<WakeChannel> WakeChannel::create() {
  // A datagram socket pair, not an eventfd or a pipe: an eventfd is one open
  // file description that the agent and every shim would share (a user who
  // cleared O_NONBLOCK on it blocked the agent's read), and a pipe's writer
  // gets SIGPIPE once the agent restarts; a shim sends with
  // MSG_DONTWAIT | MSG_NOSIGNAL, so neither its flags nor a gone agent can
  // block or kill the job.
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0) {
    return Error{std::string("socketpair for a wake channel: ") + std::strerror(errno)};
  }
  UniqueFd agent(ends[0]);
  UniqueFd shim(ends[1]);
  // One direction only: nothing the agent sends could fill a queue it never reads.
  (void)::shutdown(agent.get(), SHUT_WR);
  return WakeChannel(std::move(agent), std::move(shim));
}

WakeChannel::Drained WakeChannel::drain() {
  Drained out = Drained::kNothing;
  for (int i = 0; i < kMaxDatagramsPerDrain; ++i) {
    uint64_t datagram = 0;
    const ssize_t n = ::recv(agent_.get(), &datagram, sizeof datagram, MSG_DONTWAIT | MSG_TRUNC);
    if (n > 0) {
      out = Drained::kKicked;
      continue;
    }
    // 0 bytes: an empty datagram (a kick like any other) or, should the
    // channel be shut down, the end of it: that one stays readable forever.
    if (n == 0) {
      pollfd p{agent_.get(), POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0) {
        return Drained::kClosed;
      }
      out = Drained::kKicked;
      continue;
    }
    if (errno == EINTR) continue;
    break;  // EAGAIN: drained; any other error: nothing more to read now
  }
  return out;
}

}  // namespace egpu::agent
