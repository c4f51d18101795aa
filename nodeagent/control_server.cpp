#include "nodeagent/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/protocol/messages.h"
#include "core/util/log.h"

namespace egpu::agent {

ControlServer::ControlServer(event_base* base, std::string path, UniqueFd fd, Handler handler)
    : base_(base),
      path_(std::move(path)),
      listen_fd_(std::move(fd)),
      handler_(std::move(handler)) {}

ControlServer::~ControlServer() {
  conns_.clear();
  listen_ev_.reset();
  ::unlink(path_.c_str());
}

Result<std::unique_ptr<ControlServer>> ControlServer::listen(event_base* base,
                                                             const std::string& path,
                                                             Handler handler) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return Error{"socket path too long: " + path};
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error{std::string("socket: ") + std::strerror(errno)};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());  // a socket left by a previous agent
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Error{"bind " + path + ": " + std::strerror(errno)};
  }
  // Anyone may connect; every request is authorised from SO_PEERCRED.
  if (::chmod(path.c_str(), 0666) != 0) return Error{"chmod " + path + ": " + std::strerror(errno)};
  if (::listen(fd.get(), 128) != 0) return Error{"listen " + path + ": " + std::strerror(errno)};
  std::unique_ptr<ControlServer> server(
      new ControlServer(base, path, std::move(fd), std::move(handler)));
  server->listen_ev_.reset(event_new(base, server->listen_fd_.get(), EV_READ | EV_PERSIST,
                                     &ControlServer::on_accept, server.get()));
  if (!server->listen_ev_ || event_add(server->listen_ev_.get(), nullptr) != 0) {
    return Error{"cannot add the control socket to the event loop"};
  }
  return server;
}

void ControlServer::on_accept(evutil_socket_t fd, short, void* arg) {
  auto* self = static_cast<ControlServer*>(arg);
  for (;;) {
    UniqueFd client(::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client.valid()) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        EGPU_LOG_WARN("accept on the control socket: %s", std::strerror(errno));
      }
      return;
    }
    if (self->conns_.size() >= kMaxConnections) {
      ++self->rejected_;
      continue;  // closed by UniqueFd: the agent keeps serving the others
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(client.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      ++self->rejected_;
      continue;
    }
    // Status replies can be several chunks; let them queue without blocking.
    int sndbuf = 1 << 20;
    ::setsockopt(client.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    auto c = std::make_unique<Connection>();
    c->peer = PeerCred{cred.pid, cred.uid, cred.gid};
    c->owner = self;
    const int cfd = client.get();
    c->ev.reset(event_new(self->base_, cfd, EV_READ | EV_PERSIST | EV_TIMEOUT,
                          &ControlServer::on_readable, c.get()));
    timeval idle{kIdleTimeoutSeconds, 0};
    if (!c->ev || event_add(c->ev.get(), &idle) != 0) continue;
    c->fd = std::move(client);
    self->conns_.emplace(cfd, std::move(c));
  }
}

void ControlServer::on_readable(evutil_socket_t fd, short what, void* arg) {
  auto* c = static_cast<Connection*>(arg);
  ControlServer* self = c->owner;
  if ((what & EV_TIMEOUT) != 0) {
    self->close_connection(static_cast<int>(fd));
    return;
  }
  self->serve(c);
}

void ControlServer::serve(Connection* c) {
  const int fd = c->fd.get();
  // One byte more than the largest request: MSG_TRUNC tells an oversized one.
  uint8_t buf[protocol::kMaxRequestSize + 1];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // No control buffer: descriptors a client sends are discarded by the kernel.
  const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_TRUNC);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    close_connection(fd);
    return;
  }
  if (n == 0) {
    close_connection(fd);
    return;
  }
  ++requests_;
  // An oversized packet is passed on at its true length marker: the handler
  // sees more than kMaxRequestSize bytes and rejects it.
  const size_t len = static_cast<size_t>(n) > sizeof buf ? sizeof buf : static_cast<size_t>(n);
  std::vector<Outgoing> replies = handler_(c->peer, std::span<const uint8_t>(buf, len));
  for (const auto& out : replies) {
    if (!send(c, out)) {
      close_connection(fd);
      return;
    }
  }
}

bool ControlServer::send(Connection* c, const Outgoing& out) {
  iovec iov{const_cast<uint8_t*>(out.bytes.data()), out.bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  if (!out.fds.empty()) {
    if (out.fds.size() > 4) return false;
    const size_t bytes = sizeof(int) * out.fds.size();
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(bytes);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(bytes);
    std::memcpy(CMSG_DATA(cm), out.fds.data(), bytes);
  }
  const ssize_t n = ::sendmsg(c->fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(out.bytes.size());
}

void ControlServer::close_connection(int fd) {
  conns_.erase(fd);
}

}  // namespace egpu::agent
