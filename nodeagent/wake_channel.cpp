#include "nodeagent/wake_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "nodeagent/passed_descriptors.h"

namespace egpu::agent {

Result<WakeChannel> WakeChannel::create(uid_t owner, Descriptors how) {
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
  const bool refused =
      how == Descriptors::kRefusedWhereTheKernelCan && refuse_passed_descriptors(agent.get());
  return WakeChannel(std::move(agent), std::move(shim), owner, refused);
}

// The agent's end may hold what a shim sent; the user holds the shim's end
// too and can fill its queue by other means (disconnect it, bind it, send
// to it), so that one is never peeked (passed_descriptors.h).
WakeChannel& WakeChannel::operator=(WakeChannel&& o) {
  if (this != &o) {
    close_shared_socket(std::move(shim_), owner_);  // while the agent's end lives
    close_client_socket(std::move(agent_), owner_);
    agent_ = std::move(o.agent_);
    shim_ = std::move(o.shim_);
    owner_ = o.owner_;
    refused_ = o.refused_;
  }
  return *this;
}

WakeChannel::~WakeChannel() {
  close_shared_socket(std::move(shim_), owner_);  // while the agent's end lives
  close_client_socket(std::move(agent_), owner_);
}

WakeChannel::Drained WakeChannel::drain() {
  uint64_t payload[kMaxDatagramsPerDrain];
  iovec iov[kMaxDatagramsPerDrain];
  mmsghdr msgs[kMaxDatagramsPerDrain];
  std::memset(msgs, 0, sizeof msgs);
  for (int i = 0; i < kMaxDatagramsPerDrain; ++i) {
    iov[i] = {&payload[i], sizeof payload[i]};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  int n = 0;
  if (refused_) {
    // The kernel refuses descriptors here: one recvmmsg for the whole
    // queue. A receive per datagram and one more for EAGAIN were two
    // system calls per kick, and on a busy node system calls are most of
    // the agent's time.
    do {
      n = ::recvmmsg(agent_.get(), msgs, kMaxDatagramsPerDrain, MSG_DONTWAIT, nullptr);
    } while (n < 0 && errno == EINTR);
  } else {
    // Each datagram peeked first (passed_descriptors.h): a channel that
    // carries descriptors is the user's doing, and is read no more.
    for (; n < kMaxDatagramsPerDrain; ++n) {
      bool passes = false;
      const ssize_t got =
          receive_without_descriptors(agent_.get(), msgs[n].msg_hdr, MSG_DONTWAIT, &passes);
      if (passes) return Drained::kClosed;
      if (got < 0) break;
      msgs[n].msg_len = static_cast<unsigned>(got);
    }
  }
  if (n <= 0) return Drained::kNothing;  // EAGAIN: nothing queued; any other error: nothing now
  // 0 bytes: an empty datagram (a kick like any other) or, should the channel
  // be shut down, the end of it: that one stays readable forever.
  for (int i = 0; i < n; ++i) {
    if (msgs[i].msg_len != 0) continue;
    pollfd p{agent_.get(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0) {
      return Drained::kClosed;
    }
    break;
  }
  return Drained::kKicked;
}

}  // namespace egpu::agent
