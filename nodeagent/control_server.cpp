#include "nodeagent/control_server.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/protocol/messages.h"
#include "core/protocol/unix_address.h"
#include "core/util/log.h"
#include "core/util/trusted_paths.h"
#include "nodeagent/event_loop.h"
#include "nodeagent/passed_descriptors.h"
#include "nodeagent/peer_process.h"

namespace egpu::agent {
namespace {

// Accepts per wakeup: a connection flood must not starve the GPU schedulers,
// which share this loop. The listen event is level-triggered, so the rest of
// the backlog is taken on the next turn.
constexpr int kAcceptBatch = 64;
// A user can provoke refusals at will; say so at most this often.
constexpr int64_t kWarnIntervalNs = 10'000'000'000;

// How often parked connections are looked at, and closed ones whose reply
// is unread (which may stay so for good: looked at less often).
constexpr int64_t kSweepNs = 20'000'000;
constexpr int64_t kUnreadSweepNs = 1'000'000'000;

// Bytes this end sent that its peer has not read yet.
int unread_by_peer(int fd) {
  int n = 0;
  return ::ioctl(fd, SIOCOUTQ, &n) == 0 && n > 0 ? n : 0;
}

timespec monotonic_now() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

int64_t to_ns(const timespec& t) {
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

ControlServer::ControlServer(event_base* base, std::string path, UniqueFd fd, Handler handler,
                             const ControlLimits& limits)
    : base_(base),
      path_(std::move(path)),
      listen_fd_(std::move(fd)),
      handler_(std::move(handler)),
      limits_(limits) {}

ControlServer::~ControlServer() {
  sweep_ev_.reset();
  for (auto& [fd, c] : conns_) {
    c->ev.reset();
    close_client_socket(std::move(c->fd), c->counted_as);
  }
  conns_.clear();
  for (auto& u : unread_)
    close_client_socket(std::move(u.fd), u.counted_as);
  resume_ev_.reset();
  listen_ev_.reset();
  ::unlink(path_.c_str());
  // Connections not yet accepted are released with it, and their queues
  // (on a user's own socket, what that user may have passed in them).
  close_elsewhere(std::move(listen_fd_), limits_.only_uid.value_or(0));
}

Result<std::unique_ptr<ControlServer>> ControlServer::listen(
    event_base* base, const std::string& path, Handler handler, const ControlLimits& limits,
    mode_t mode, std::optional<uid_t> owner) {
  // Between bind and chmod a user who may rename in the socket's directory
  // could put a symlink in its place (set_socket_mode refuses it), or
  // replace the socket itself: such a directory is refused. Checked before
  // the address opens it (a long path is bound through that descriptor).
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  if (Status s = check_trusted_directory(dir, ::geteuid()); !s) {
    return Error{"socket " + path + ": " + s.error()};
  }
  auto addr = protocol::UnixAddress::of(path);
  if (!addr) return Error{addr.error()};
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error{std::string("socket: ") + std::strerror(errno)};
  ::unlink(path.c_str());  // a socket left by a previous agent
  if (::bind(fd.get(), addr->get(), addr->size()) != 0) {
    return Error{"bind " + path + ": " + std::strerror(errno)};
  }
  // Anyone may connect: shims run as the job's user, whoever that is, so no
  // narrower owner or group fits. Every request is authorised from
  // SO_PEERCRED, and what a user can hoard is bounded by the caps above.
  if (Status s = set_socket_mode(path, mode, owner); !s) return Error{s.error()};
  // Accepted sockets inherit it: where the kernel can, senders of
  // descriptors are refused before anything reaches the agent.
  (void)refuse_passed_descriptors(fd.get());
  // The kernel's maximum: a large step's tasks attach at once, and waiting in
  // the backlog costs the agent no descriptor.
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return Error{"listen " + path + ": " + std::strerror(errno)};
  }
  std::unique_ptr<ControlServer> server(
      new ControlServer(base, path, std::move(fd), std::move(handler), limits));
  server->listen_ev_.reset(event_new(base, server->listen_fd_.get(), EV_READ | EV_PERSIST,
                                     &ControlServer::on_accept, server.get()));
  server->resume_ev_.reset(evtimer_new(base, &ControlServer::on_resume, server.get()));
  if (!server->listen_ev_ || !server->resume_ev_ ||
      event_add(server->listen_ev_.get(), nullptr) != 0) {
    return Error{"cannot add the control socket to the event loop"};
  }
  return server;
}

void ControlServer::on_accept(evutil_socket_t, short, void* arg) {
  static_cast<ControlServer*>(arg)->accept_batch();
}

void ControlServer::on_resume(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<ControlServer*>(arg);
  event_add(self->listen_ev_.get(), nullptr);
}

bool ControlServer::should_warn() {
  const int64_t now = to_ns(monotonic_now());
  if (last_warn_ns_ != 0 && now - last_warn_ns_ < kWarnIntervalNs) return false;
  last_warn_ns_ = now;
  return true;
}

void ControlServer::pause_accepting(int err) {
  // Out of descriptors (or kernel memory) the backlog stays readable, and
  // retrying at once would spin the loop. Stop watching the socket for a
  // moment: waiting clients stay in the backlog and are served once
  // descriptors are free again; ones that give up first cost nothing.
  if (should_warn()) {
    EGPU_LOG_WARN("control socket: cannot accept: %s; pausing accepts for %d ms",
                  std::strerror(err), limits_.accept_pause_ms);
  }
  event_del(listen_ev_.get());
  const timeval pause = timeval_from_ns(int64_t{limits_.accept_pause_ms} * 1'000'000);
  if (evtimer_add(resume_ev_.get(), &pause) != 0) event_add(listen_ev_.get(), nullptr);
}

bool ControlServer::admit(const PeerCred& peer, uid_t* counted_as) {
  // First: a refused connection is closed as what it counts as too (what it
  // passed goes to that uid's disposal processes).
  const bool stranger = peer.uid != 0 && is_tenant_ && !is_tenant_(peer.uid) &&
                        !(monitor_gid_ && peer_in_group(peer.socket, peer.gid, *monitor_gid_));
  *counted_as = stranger ? kStrangers : peer.uid;
  if (conns_.size() + unread_.size() >= limits_.max_connections) {
    if (should_warn()) {
      EGPU_LOG_WARN("control socket: all %zu connections in use; refusing uid %u",
                    limits_.max_connections, static_cast<unsigned>(peer.uid));
    }
    return false;
  }
  if (peer.uid == 0) return true;  // only the total bounds root
  if (limits_.root_only || (limits_.only_uid && peer.uid != *limits_.only_uid)) return false;
  const size_t users_max = limits_.max_connections > limits_.root_reserved
                               ? limits_.max_connections - limits_.root_reserved
                               : 0;
  if (non_root_ >= users_max) {
    if (should_warn()) {
      EGPU_LOG_WARN("control socket: users hold all %zu of their connections; refusing uid %u",
                    users_max, static_cast<unsigned>(peer.uid));
    }
    return false;
  }
  if (per_uid_.held(*counted_as) >= limits_.per_uid) {
    if (should_warn()) {
      if (*counted_as == kStrangers) {
        EGPU_LOG_WARN(
            "control socket: uids that own no instance here hold %zu connections, their limit "
            "together; refusing uid %u",
            limits_.per_uid, static_cast<unsigned>(peer.uid));
      } else {
        EGPU_LOG_WARN("control socket: uid %u holds %zu connections, its limit; refusing more",
                      static_cast<unsigned>(peer.uid), limits_.per_uid);
      }
    }
    return false;
  }
  return true;
}

void ControlServer::accept_batch() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    UniqueFd client(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client.valid()) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // The one connection went away or failed; the next may be fine.
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      pause_accepting(err);  // EMFILE, ENFILE, ENOBUFS, ENOMEM, anything unexpected
      return;
    }
    // SO_PEERCRED holds the connecting process's credentials, fixed at
    // connect: what a client does later cannot change the uid it counts for.
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(client.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      ++rejected_;
      close_client_socket(std::move(client), kUnknownUid);
      continue;
    }
    const PeerCred peer{cred.pid, cred.uid, cred.gid, client.get()};
    uid_t counted_as = peer.uid;
    if (!admit(peer, &counted_as)) {
      ++rejected_;
      close_client_socket(std::move(client), counted_as);  // the agent keeps serving the others
      continue;
    }
    // Status replies can be several chunks; let them queue without blocking.
    int sndbuf = 1 << 20;
    ::setsockopt(client.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    auto c = std::make_unique<Connection>();
    c->peer = peer;
    c->counted_as = counted_as;
    c->owner = this;
    c->deadline = monotonic_now();
    c->deadline.tv_sec += limits_.lifetime_s;
    const int cfd = client.get();
    // The timeout is set by arm(): the idle timeout, cut to what is left of
    // the lifetime.
    c->ev.reset(event_new(base_, cfd, EV_READ | EV_PERSIST, &ControlServer::on_readable, c.get()));
    if (!c->ev || !arm(c.get())) {
      c.reset();  // its event before the socket
      close_client_socket(std::move(client), counted_as);
      continue;
    }
    // admit() saw room, and nothing was counted since: the take cannot fail.
    if (peer.uid != 0 && !per_uid_.take(counted_as, limits_.per_uid)) {
      c.reset();
      close_client_socket(std::move(client), counted_as);
      continue;
    }
    if (peer.uid != 0) ++non_root_;
    c->fd = std::move(client);
    conns_.emplace(cfd, std::move(c));
  }
}

bool ControlServer::arm(Connection* c) {
  int64_t timeout_ns = int64_t{limits_.idle_timeout_s} * 1'000'000'000;
  if (c->peer.uid != 0) {
    const int64_t left = to_ns(c->deadline) - to_ns(monotonic_now());
    if (left <= 0) return false;
    timeout_ns = std::min(timeout_ns, left);
  }
  // Re-adding a pending event replaces its timeout: a request restarts the
  // idle timer, never the lifetime.
  const timeval tv = timeval_from_ns(timeout_ns);
  return event_add(c->ev.get(), &tv) == 0;
}

void ControlServer::on_readable(evutil_socket_t fd, short what, void* arg) {
  auto* c = static_cast<Connection*>(arg);
  ControlServer* self = c->owner;
  if ((what & EV_TIMEOUT) != 0) {
    self->close_connection(static_cast<int>(fd));
    return;
  }
  // A client that sends requests without reading the replies would have
  // the agent queue them (kernel memory, the agent's) until its socket's
  // buffer is full: its next request waits until it has read the last reply.
  if (unread_by_peer(static_cast<int>(fd)) > 0) {
    if (!self->park(c)) self->close_connection(static_cast<int>(fd));
    return;
  }
  if (!self->within_budget(c)) return;
  if (!self->serve(c)) return;  // closed
  if (c->parked) return;        // its replies wait for room (see sweep)
  if (!self->arm(c)) self->close_connection(static_cast<int>(fd));
}

bool ControlServer::serve(Connection* c) {
  const int fd = c->fd.get();
  // One byte more than the largest request: MSG_TRUNC tells an oversized one.
  uint8_t buf[protocol::kMaxRequestSize + 1];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Peeked first: a message that carries descriptors is never taken in
  // here (passed_descriptors.h).
  bool passes = false;
  const ssize_t n = receive_without_descriptors(fd, msg, MSG_DONTWAIT | MSG_TRUNC, &passes);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return true;
    close_connection(fd);
    return false;
  }
  if (passes) {
    // No request carries descriptors: a client that sends some is not one.
    if (should_warn()) {
      EGPU_LOG_WARN("control socket: uid %u sent descriptors; connection closed",
                    static_cast<unsigned>(c->peer.uid));
    }
    close_connection(fd);
    return false;
  }
  if (n == 0) {
    close_connection(fd);
    return false;
  }
  ++requests_;
  // An oversized packet is passed on at its true length marker: the handler
  // sees more than kMaxRequestSize bytes and rejects it.
  const size_t len = static_cast<size_t>(n) > sizeof buf ? sizeof buf : static_cast<size_t>(n);
  std::vector<Outgoing> replies = handler_(c->peer, std::span<const uint8_t>(buf, len));
  if (RequestBudget* budget = limits_.request_budget.get(); budget != nullptr && c->peer.uid != 0) {
    size_t bytes = 0;
    for (const Outgoing& r : replies)
      bytes += r.bytes.size();
    const size_t per_token = std::max<size_t>(1, limits_.bytes_per_token);
    budget->charge(c->counted_as, 1.0 + static_cast<double>(bytes / per_token),
                   to_ns(monotonic_now()));
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    const Sent sent = send(c, replies[i].bytes, replies[i].fds);
    if (sent == Sent::kAll) continue;
    // A reply larger than the socket's buffer waits in the agent, its
    // connection unread meanwhile, and goes as the peer reads (sweep).
    if (sent == Sent::kFailed || !keep_waiting(c, replies, i) || !park(c)) {
      close_connection(fd);
      return false;
    }
    break;
  }
  return true;
}

bool ControlServer::keep_waiting(Connection* c, std::vector<Outgoing>& replies, size_t from) {
  size_t bytes = 0;
  for (size_t i = from; i < replies.size(); ++i) {
    if (!replies[i].fds.empty()) return false;  // descriptors are the caller's to close
    bytes += replies[i].bytes.size();
  }
  const bool user = c->peer.uid != 0;
  const auto of_uid = waiting_bytes_of_.find(c->counted_as);
  const size_t uid_waiting = of_uid != waiting_bytes_of_.end() ? of_uid->second : 0;
  if (c->waiting_bytes + bytes > limits_.max_waiting_bytes ||
      (user && (uid_waiting + bytes > limits_.per_uid_max_waiting_bytes ||
                users_waiting_bytes_ + bytes > limits_.users_max_waiting_bytes))) {
    if (should_warn()) {
      EGPU_LOG_WARN(
          "control socket: a reply of %zu bytes to uid %u does not fit what may wait "
          "for its reader; connection closed",
          bytes, static_cast<unsigned>(c->peer.uid));
    }
    return false;
  }
  for (size_t i = from; i < replies.size(); ++i)
    c->waiting.push_back(std::move(replies[i].bytes));
  c->waiting_bytes += bytes;
  count_waiting(c->counted_as, bytes, 0);
  return true;
}

void ControlServer::count_waiting(uid_t uid, size_t added, size_t taken) {
  if (uid == 0) return;
  users_waiting_bytes_ = users_waiting_bytes_ + added - taken;
  size_t& mine = waiting_bytes_of_[uid];
  mine = mine + added - taken;
  if (mine == 0) waiting_bytes_of_.erase(uid);
}

bool ControlServer::send_waiting(Connection* c) {
  while (!c->waiting.empty()) {
    const size_t n = c->waiting.front().size();
    const Sent sent = send(c, c->waiting.front(), {});
    if (sent == Sent::kFailed) return false;
    if (sent == Sent::kNoRoom) return true;
    c->waiting.pop_front();
    c->waiting_bytes -= n;
    count_waiting(c->counted_as, 0, n);
  }
  return true;
}

ControlServer::Sent ControlServer::send(Connection* c, std::span<const uint8_t> bytes,
                                        std::span<const int> fds) {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * protocol::kMaxReplyFds)];
  if (!fds.empty()) {
    if (fds.size() > protocol::kMaxReplyFds) return Sent::kFailed;
    const size_t size = sizeof(int) * fds.size();
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(size);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(size);
    std::memcpy(CMSG_DATA(cm), fds.data(), size);
  }
  const ssize_t n = ::sendmsg(c->fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(bytes.size())) return Sent::kAll;
  // A packet goes whole or not at all: no room now is the buffer full.
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? Sent::kNoRoom : Sent::kFailed;
}

void ControlServer::close_connection(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  const uid_t uid = it->second->peer.uid;
  const uid_t counted_as = it->second->counted_as;
  count_waiting(counted_as, 0, it->second->waiting_bytes);
  UniqueFd socket = std::move(it->second->fd);
  conns_.erase(it);  // its event first, then the socket
  if (uid != 0 && unread_by_peer(socket.get()) > 0) {
    // Closed, its reply pinned until read: still its uid's (see Unread).
    // Shut for reading: nothing more queues in it meanwhile.
    ::shutdown(socket.get(), SHUT_RD);
    unread_.push_back({std::move(socket), counted_as});
    (void)sweep_in(kUnreadSweepNs);  // else looked at when a connection parks
    return;
  }
  if (uid != 0) {
    --non_root_;
    per_uid_.give_back(counted_as);
  }
  close_client_socket(std::move(socket), counted_as);
}

bool ControlServer::within_budget(Connection* c) {
  RequestBudget* budget = limits_.request_budget.get();
  if (c->peer.uid == 0 || budget == nullptr) return true;
  // A peer's close (or an error) costs nothing and is never held: serve()
  // closes the connection, which gives its slot back.
  uint8_t first = 0;
  if (::recv(c->fd.get(), &first, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return true;
  if (budget->may_serve(c->counted_as, to_ns(monotonic_now()))) return true;
  // Its request stays in its socket meanwhile: nothing is refused, and
  // nothing of it is kept in the agent.
  if (park(c)) {
    c->throttled = true;
  } else {
    close_connection(c->fd.get());
  }
  return false;
}

bool ControlServer::park(Connection* c) {
  if (!sweep_in(kSweepNs)) return false;  // never parked where nothing would look again
  event_del(c->ev.get());
  c->parked = true;
  c->parked_ns = to_ns(monotonic_now());
  return true;
}

bool ControlServer::sweep_in(int64_t ns) {
  if (!sweep_ev_) sweep_ev_.reset(evtimer_new(base_, &ControlServer::on_sweep, this));
  if (!sweep_ev_) return false;
  // A sweep due sooner stays; one due later is brought forward.
  const int64_t due = to_ns(monotonic_now()) + ns;
  if (evtimer_pending(sweep_ev_.get(), nullptr) != 0 && sweep_due_ns_ <= due) return true;
  const timeval after = timeval_from_ns(ns);
  if (evtimer_add(sweep_ev_.get(), &after) != 0) return false;
  sweep_due_ns_ = due;
  return true;
}

void ControlServer::on_sweep(evutil_socket_t, short, void* arg) {
  static_cast<ControlServer*>(arg)->sweep();
}

void ControlServer::sweep() {
  const int64_t now = to_ns(monotonic_now());
  bool again = false;
  std::vector<int> to_close;
  for (auto& [fd, c] : conns_) {
    if (!c->parked) continue;
    if (!c->waiting.empty()) {
      const size_t before = c->waiting_bytes;
      if (!send_waiting(c.get())) {
        to_close.push_back(fd);
        continue;
      }
      if (c->waiting_bytes < before) c->parked_ns = now;  // its reader reads: not idle
    }
    const bool budget_left = !c->throttled || limits_.request_budget == nullptr ||
                             limits_.request_budget->ready_at(c->counted_as, now) <= now;
    if (c->waiting.empty() && unread_by_peer(fd) == 0 && budget_left) {
      c->parked = false;
      c->throttled = false;
      if (!arm(c.get())) to_close.push_back(fd);  // its lifetime ran out
    } else if (now - c->parked_ns >= int64_t{limits_.idle_timeout_s} * 1'000'000'000 ||
               (c->peer.uid != 0 && now >= to_ns(c->deadline))) {
      to_close.push_back(fd);  // idle, as far as its requests go
    } else {
      again = true;
    }
  }
  for (int fd : to_close)
    close_connection(fd);
  std::erase_if(unread_, [&](Unread& u) {
    if (unread_by_peer(u.fd.get()) > 0) return false;
    --non_root_;
    per_uid_.give_back(u.counted_as);
    close_client_socket(std::move(u.fd), u.counted_as);
    return true;
  });
  if (again) {
    if (!sweep_in(kSweepNs)) {
      // Nothing would look at the parked ones again: close them.
      std::vector<int> parked;
      for (auto& [fd, c] : conns_)
        if (c->parked) parked.push_back(fd);
      for (int fd : parked)
        close_connection(fd);
    }
  } else if (!unread_.empty()) {
    (void)sweep_in(kUnreadSweepNs);
  }
}

}  // namespace egpu::agent
