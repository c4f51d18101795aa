#include "shim/attach_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/protocol/codec.h"
#include "core/util/clock.h"

namespace egpu::shim {
namespace {

constexpr int kReplyFds = 3;

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

bool fail(AttachError* error, AttachFailure kind, std::string message) {
  error->kind = kind;
  error->message = std::move(message);
  return false;
}

// Waits for `events` on fd until `deadline` (CLOCK_MONOTONIC ns).
bool wait_for(int fd, short events, int64_t deadline, const char* what, AttachError* error) {
  for (;;) {
    const int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) {
      return fail(error, AttachFailure::kUnreachable, std::string(what) + ": timed out");
    }
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left_ms));
    if (n > 0) {
      if ((p.revents & events) != 0) return true;
      if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
        return fail(error, AttachFailure::kUnreachable,
                    std::string(what) + ": the agent closed the connection");
      }
    } else if (n < 0 && errno != EINTR) {
      return fail(error, AttachFailure::kUnreachable, errno_text(what));
    }
  }
}

uint32_t next_request_id() {
  static std::atomic<uint32_t> counter{0};
  return (static_cast<uint32_t>(::getpid()) << 8) ^ (counter.fetch_add(1) + 1);
}

}  // namespace

bool request_attach(const std::string& socket_path, const protocol::AttachRequest& request,
                    int timeout_ms, AttachReply* out, AttachError* error) {
  const int64_t deadline = monotonic_ns() + int64_t{timeout_ms} * 1'000'000;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
    return fail(error, AttachFailure::kRefused, "socket path '" + socket_path + "' is not usable");
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);

  UniqueFd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return fail(error, AttachFailure::kUnreachable, errno_text("socket"));
  if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) {
      return fail(error, AttachFailure::kUnreachable,
                  errno_text(("connect " + socket_path).c_str()));
    }
    if (!wait_for(sock.get(), POLLOUT, deadline, "connect", error)) return false;
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
      errno = so_error;
      return fail(error, AttachFailure::kUnreachable,
                  errno_text(("connect " + socket_path).c_str()));
    }
  }

  const uint32_t request_id = next_request_id();
  const std::vector<uint8_t> message = protocol::encode_request(request, request_id);
  for (;;) {
    const ssize_t sent = ::send(sock.get(), message.data(), message.size(), MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(message.size())) break;
    if (sent < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(sock.get(), POLLOUT, deadline, "send", error)) return false;
      continue;
    }
    // An agent that closes at once (overloaded, restarting) may do so before
    // the request is out: said as plainly as a close after it.
    if (sent < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return fail(error, AttachFailure::kUnreachable,
                  "the agent closed the connection before the request was sent");
    }
    return fail(error, AttachFailure::kUnreachable, errno_text("send"));
  }

  std::vector<uint8_t> buffer(protocol::kMaxReplySize);
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kReplyFds)];
  std::vector<UniqueFd> fds;
  ssize_t got = -1;
  int msg_flags = 0;
  for (;;) {
    if (!wait_for(sock.get(), POLLIN, deadline, "waiting for the agent's reply", error)) {
      return false;
    }
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    got = ::recvmsg(sock.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got < 0 && (errno == ECONNRESET || errno == EPIPE)) {
      return fail(error, AttachFailure::kUnreachable,
                  "the agent closed the connection without a reply");
    }
    if (got < 0) return fail(error, AttachFailure::kUnreachable, errno_text("recvmsg"));
    // Own every descriptor that arrived, whatever else is wrong with the reply.
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    msg_flags = msg.msg_flags;
    break;
  }
  if (got == 0) {
    return fail(error, AttachFailure::kUnreachable,
                "the agent closed the connection without a reply");
  }
  if ((msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return fail(error, AttachFailure::kUnreachable, "the agent's reply was truncated");
  }
  auto reply =
      protocol::decode_reply(std::span(buffer.data(), static_cast<size_t>(got)), request_id);
  if (!reply) {
    return fail(error, AttachFailure::kUnreachable,
                "malformed reply from the agent: " + reply.error());
  }
  if (reply->status != protocol::ReplyStatus::kOk) {
    std::string text = std::string("the agent refused: ") + protocol::to_string(reply->status);
    if (!reply->text.empty()) text += " (" + reply->text + ")";
    return fail(error, AttachFailure::kRefused, std::move(text));
  }
  if (fds.size() != kReplyFds) {
    return fail(
        error, AttachFailure::kUnreachable,
        "the agent's reply carried " + std::to_string(fds.size()) + " descriptors, expected 3");
  }
  out->reply = std::move(*reply);
  out->gpu_page = std::move(fds[0]);
  out->instance_page = std::move(fds[1]);
  out->wake = std::move(fds[2]);
  return true;
}

}  // namespace egpu::shim
