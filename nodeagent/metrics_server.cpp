#include "nodeagent/metrics_server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/util/clock.h"
#include "core/util/log.h"
#include "nodeagent/event_loop.h"

namespace egpu::agent {
namespace {

// The request line and headers; a scraper sends a few hundred bytes.
constexpr size_t kMaxRequestBytes = 8192;
constexpr int kAcceptBatch = 16;

}  // namespace

struct MetricsServer::Connection {
  bufferevent* bev = nullptr;
  EventHandle deadline;
  MetricsServer* owner = nullptr;
  // Counted in per_uid_ (clients sock_diag cannot name share one entry);
  // unset for root.
  std::optional<uid_t> uid;
  bool replied = false;
  bool waiting = false;  // for the next render (min_render_interval_ms)
  bool head = false;
  ~Connection() {
    if (bev != nullptr) bufferevent_free(bev);  // closes the socket
    if (uid) owner->release(*uid);
  }
};

MetricsServer::MetricsServer(event_base* base, UniqueFd fd, Render render,
                             const MetricsLimits& limits)
    : base_(base), listen_fd_(std::move(fd)), render_(std::move(render)), limits_(limits) {}

MetricsServer::~MetricsServer() {
  conns_.clear();
  resume_ev_.reset();
  listen_ev_.reset();
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(event_base* base,
                                                            const std::string& host, int port,
                                                            Render render,
                                                            const MetricsLimits& limits) {
  const std::string where = host + ":" + std::to_string(port);
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    addr_len = sizeof *v4;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    addr_len = sizeof *v6;
  } else {
    return Error{"metrics address " + where + ": not an IP address"};
  }
  UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error{std::string("metrics socket: ") + std::strerror(errno)};
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 ||
      ::listen(fd.get(), SOMAXCONN) != 0) {  // a short backlog is one a flood holds
    return Error{"cannot listen for metrics on " + where + ": " + std::strerror(errno)};
  }
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(base, std::move(fd), std::move(render), limits));
  server->listen_ev_.reset(event_new(base, server->listen_fd_.get(), EV_READ | EV_PERSIST,
                                     &MetricsServer::on_accept, server.get()));
  server->resume_ev_.reset(evtimer_new(base, &MetricsServer::on_resume, server.get()));
  server->render_ev_.reset(evtimer_new(base, &MetricsServer::on_render_due, server.get()));
  if (!server->listen_ev_ || !server->resume_ev_ || !server->render_ev_ ||
      event_add(server->listen_ev_.get(), nullptr) != 0) {
    return Error{"cannot add the metrics socket to the event loop"};
  }
  server->listening_ = true;
  if (auto peers = LoopbackPeers::open()) {
    server->peers_.emplace(std::move(*peers));
  } else {
    EGPU_LOG_WARN(
        "metrics: cannot learn clients' users (%s); only the total of %zu connections "
        "is bounded",
        peers.error().c_str(), limits.max_connections);
  }
  return server;
}

int MetricsServer::port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

void MetricsServer::on_accept(evutil_socket_t, short, void* arg) {
  static_cast<MetricsServer*>(arg)->accept_batch();
}

void MetricsServer::on_resume(evutil_socket_t, short, void* arg) {
  static_cast<MetricsServer*>(arg)->maybe_resume();
}

void MetricsServer::stop_listening() {
  if (!listening_) return;
  event_del(listen_ev_.get());
  listening_ = false;
}

// Listening again once there is room and no descriptor pause is running.
void MetricsServer::maybe_resume() {
  if (listening_ || conns_.size() >= limits_.max_connections) return;
  if (evtimer_pending(resume_ev_.get(), nullptr) != 0) return;
  listening_ = event_add(listen_ev_.get(), nullptr) == 0;
}

void MetricsServer::accept_batch() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    if (conns_.size() >= limits_.max_connections) {
      stop_listening();  // resumed when a connection closes
      return;
    }
    UniqueFd client(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client.valid()) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // Out of descriptors the backlog stays readable: pause, do not spin.
      EGPU_LOG_DEBUG("metrics: cannot accept: %s", std::strerror(err));
      stop_listening();
      const timeval pause = timeval_from_ns(int64_t{limits_.accept_pause_ms} * 1'000'000);
      evtimer_add(resume_ev_.get(), &pause);
      return;
    }
    auto c = std::make_unique<Connection>();
    c->owner = this;
    if (!admit(client.get(), c.get())) {
      ++rejected_;
      continue;  // closed here: its user holds its share already
    }
    c->bev = bufferevent_socket_new(base_, client.get(), BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == nullptr) continue;
    client.release();  // the bufferevent owns it now
    c->deadline.reset(evtimer_new(base_, &MetricsServer::on_deadline, c.get()));
    const timeval limit{limits_.timeout_s, 0};
    if (!c->deadline || evtimer_add(c->deadline.get(), &limit) != 0) continue;
    bufferevent_setcb(c->bev, &MetricsServer::on_read, &MetricsServer::on_written,
                      &MetricsServer::on_event, c.get());
    // Stop reading at the cap; on_read then answers 431.
    bufferevent_setwatermark(c->bev, EV_READ, 0, kMaxRequestBytes);
    if (bufferevent_enable(c->bev, EV_READ) != 0) continue;
    Connection* key = c.get();
    conns_.emplace(key, std::move(c));
  }
}

// Counts the connection against its user's share, or refuses it. Root is
// not counted; clients whose user sock_diag cannot name (gone already, or a
// lookup that failed) share the allowance of one user.
bool MetricsServer::admit(int fd, Connection* c) {
  if (!peers_) return true;  // only the total is bounded (said at start)
  constexpr uid_t kUnknownUser = static_cast<uid_t>(-1);
  uid_t uid = kUnknownUser;
  if (auto known = peers_->uid_of(fd)) {
    uid = *known;
  } else {
    EGPU_LOG_DEBUG("metrics: a client's user is unknown: %s", known.error().c_str());
  }
  if (uid == 0) return true;
  // Users leave root its reserve (an unknown client counts as a user).
  if (users_ + std::min(limits_.root_reserved, limits_.max_connections) >=
      limits_.max_connections) {
    return false;
  }
  if (!per_uid_.take(uid, limits_.per_uid)) return false;
  c->uid = uid;
  ++users_;
  return true;
}

void MetricsServer::release(uid_t uid) {
  per_uid_.give_back(uid);
  --users_;
}

void MetricsServer::on_read(bufferevent*, void* arg) {
  auto* c = static_cast<Connection*>(arg);
  if (!c->replied) c->owner->handle_request(c);
}

void MetricsServer::on_written(bufferevent* bev, void* arg) {
  auto* c = static_cast<Connection*>(arg);
  if (c->replied && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
    c->owner->close_connection(c);
}

void MetricsServer::on_event(bufferevent*, short, void* arg) {
  auto* c = static_cast<Connection*>(arg);  // EOF, error: nothing more to do
  c->owner->close_connection(c);
}

void MetricsServer::on_deadline(evutil_socket_t, short, void* arg) {
  auto* c = static_cast<Connection*>(arg);
  c->owner->close_connection(c);
}

void MetricsServer::handle_request(Connection* c) {
  evbuffer* in = bufferevent_get_input(c->bev);
  const bool complete = evbuffer_search(in, "\r\n\r\n", 4, nullptr).pos >= 0 ||
                        evbuffer_search(in, "\n\n", 2, nullptr).pos >= 0;
  if (!complete) {
    if (evbuffer_get_length(in) >= kMaxRequestBytes)
      respond(c, 431, "Request Header Fields Too Large", "", false);
    return;
  }
  char* raw = evbuffer_readln(in, nullptr, EVBUFFER_EOL_CRLF);
  const std::string line = raw != nullptr ? raw : "";
  std::free(raw);
  // METHOD SP TARGET SP HTTP/1.x
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos ||
      line.compare(sp2 + 1, 7, "HTTP/1.") != 0) {
    respond(c, 400, "Bad Request", "bad request line\n", false);
    return;
  }
  const std::string method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    respond(c, 405, "Method Not Allowed", "GET or HEAD\n", false);
    return;
  }
  if (target != "/metrics" && target != "/") {
    respond(c, 404, "Not Found", "try /metrics\n", head);
    return;
  }
  c->waiting = true;
  c->head = head;
  // Nothing more is read from it: more bytes would be taken for another
  // request, and a client that shut its sending side after the request
  // (HTTP/1.0 scripts, nc -N) would be closed unanswered on that end.
  bufferevent_disable(c->bev, EV_READ);
  const int64_t due = last_render_ns_ + int64_t{limits_.min_render_interval_ms} * 1'000'000;
  const int64_t now = monotonic_ns();
  if (renders_ == 0 || now >= due) {
    answer_waiting();
    return;
  }
  if (evtimer_pending(render_ev_.get(), nullptr) == 0) {
    const timeval tv = timeval_from_ns(due - now);
    if (evtimer_add(render_ev_.get(), &tv) != 0) answer_waiting();  // no timer: now, then
  }
}

void MetricsServer::on_render_due(evutil_socket_t, short, void* arg) {
  static_cast<MetricsServer*>(arg)->answer_waiting();
}

// One render for every request waiting for it.
void MetricsServer::answer_waiting() {
  evtimer_del(render_ev_.get());
  const std::string body = render_();
  last_render_ns_ = monotonic_ns();
  ++renders_;
  for (const auto& [key, c] : conns_) {
    if (!c->waiting) continue;
    c->waiting = false;
    respond(c.get(), 200, "OK", body, c->head);
  }
}

void MetricsServer::respond(Connection* c, int code, const char* reason, const std::string& body,
                            bool head_only) {
  c->replied = true;
  bufferevent_disable(c->bev, EV_READ);
  evbuffer* out = bufferevent_get_output(c->bev);
  const char* type = code == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain";
  evbuffer_add_printf(out,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      code, reason, type, body.size());
  if (!head_only) evbuffer_add(out, body.data(), body.size());
  // on_written closes the connection once the reply is out.
}

void MetricsServer::close_connection(Connection* c) {
  conns_.erase(c);  // frees the bufferevent and closes the socket
  maybe_resume();
}

}  // namespace egpu::agent
