#include "core/protocol/socket_io.h"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/protocol/messages.h"

namespace egpu::protocol {
namespace {

// A full backlog gives nothing to poll for: how long to wait before trying again.
constexpr int64_t kBacklogRetryNs = 5'000'000;

Error errno_error(const char* what, int err) {
  return Error{std::string(what) + ": " + std::strerror(err)};
}

// Waits until `fd` reports `events` or an error or hang-up, which the next call
// on the socket then reports in its own words. EINTR is waited out.
Status wait_ready(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    const int timeout_ms = deadline.poll_timeout_ms();
    if (timeout_ms == 0) return Error{std::string(what) + ": timed out"};
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return errno_error(what, errno);
  }
}

void sleep_until_retry(Deadline deadline) {
  const int64_t until = std::min(monotonic_ns() + kBacklogRetryNs, deadline.at_ns());
  const timespec ts{static_cast<time_t>(until / 1'000'000'000), until % 1'000'000'000};
  // An interrupted sleep only means an earlier retry.
  (void)::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

// Takes ownership of every descriptor in `msg`'s SCM_RIGHTS headers. Counts
// only what lies inside the control buffer, whatever a header claims.
void take_descriptors(msghdr& msg, std::vector<UniqueFd>* fds) {
  const auto* end = static_cast<const unsigned char*>(msg.msg_control) + msg.msg_controllen;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const unsigned char* data = CMSG_DATA(c);
    const size_t claimed = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const size_t inside = data < end ? static_cast<size_t>(end - data) / sizeof(int) : 0;
    for (size_t i = 0; i < std::min(claimed, inside); ++i) {
      int fd = -1;
      std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
      if (fd >= 0) fds->emplace_back(fd);
    }
  }
}

}  // namespace

Status connect_by(int fd, const sockaddr* addr, socklen_t addr_len, Deadline deadline) {
  for (;;) {
    if (::connect(fd, addr, addr_len) == 0) return Status::Ok();
    const int err = errno;
    if (err == EINPROGRESS || err == EINTR) break;  // completes on its own: poll for it
    if (err != EAGAIN) return Error{std::strerror(err)};
    if (deadline.passed()) return Error{"timed out: the listener accepts no more connections"};
    sleep_until_retry(deadline);
  }
  if (Status s = wait_ready(fd, POLLOUT, deadline, "connect"); !s) return s;
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) {
    return errno_error("getsockopt(SO_ERROR)", errno);
  }
  if (so_error != 0) return Error{std::strerror(so_error)};
  return Status::Ok();
}

Status send_message(int fd, std::span<const uint8_t> bytes, Deadline deadline) {
  for (;;) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent == static_cast<ssize_t>(bytes.size())) return Status::Ok();
    if (sent >= 0) {
      return Error{"sent " + std::to_string(sent) + " of the request's " +
                   std::to_string(bytes.size()) + " bytes"};
    }
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
      if (Status s = wait_ready(fd, POLLOUT, deadline, "sending the request"); !s) return s;
      continue;
    }
    // An agent that closes at once (overloaded, restarting) may do so before
    // the request is out: said as plainly as a close after it.
    if (err == EPIPE || err == ECONNRESET) {
      return Error{"the agent closed the connection before the request was sent"};
    }
    return errno_error("send", err);
  }
}

Result<size_t> receive_message(int fd, std::span<uint8_t> buffer, Deadline deadline,
                               std::vector<UniqueFd>* fds) {
  // Room for every descriptor one message can bring, made before any arrives:
  // from recvmsg on, nothing may fail before they are owned.
  fds->reserve(fds->size() + kMaxReplyFds);
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int) * kMaxReplyFds)];
  for (;;) {
    if (Status s = wait_ready(fd, POLLIN, deadline, "waiting for the agent's reply"); !s) {
      return Error{s.error()};
    }
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) continue;
      if (err == ECONNRESET || err == EPIPE) {
        return Error{"the agent closed the connection without a reply"};
      }
      return errno_error("recvmsg", err);
    }
    take_descriptors(msg, fds);
    if (got == 0) return Error{"the agent closed the connection without a reply"};
    if ((msg.msg_flags & MSG_TRUNC) != 0) {
      return Error{"the agent's reply was truncated: longer than " + std::to_string(buffer.size()) +
                   " bytes"};
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      return Error{"the agent's reply was truncated: more than " + std::to_string(kMaxReplyFds) +
                   " descriptors"};
    }
    return static_cast<size_t>(got);
  }
}

}  // namespace egpu::protocol
