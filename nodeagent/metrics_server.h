// MetricsServer: Prometheus text exposition over HTTP on a loopback address,
// off unless MetricsAddress is set. One request per connection, answered and
// closed (Connection: close), which is all a scraper needs.
//
// Any local user can connect to a loopback port, so connections are capped:
// at the cap the server stops accepting (waiting clients stay in the kernel's
// backlog, at no descriptor of ours) until one closes. Each user but root
// also gets only a few of them (the user comes from sock_diag,
// loopback_peer.h): a user past that is closed at accept, so one user
// reconnecting in a loop can neither hold every slot nor keep the backlog
// full in front of the scraper. Clients whose user cannot be learnt share
// one such allowance; only where sock_diag does not work at all (checked
// at start) is the total the only bound. libevent 2.1's evhttp
// (Debian 12 ships 2.1.12) cannot do that: evhttp_set_max_connections came in
// 2.2, and evhttp_bind_listener replaces the listener's callback, so nothing
// of ours sees a connection before evhttp holds it. Hence this small server
// on bufferevents.
#pragma once

#include <event2/event.h>
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/util/per_uid_count.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/event_handle.h"
#include "nodeagent/loopback_peer.h"

struct bufferevent;

namespace egpu::agent {

struct MetricsLimits {
  // A scraper needs one; a few for humans with curl at the same time.
  size_t max_connections = 8;
  // Per non-root user: a scraper or a curl needs one at a time. (Not shared
  // by uids that own no instance, as the control socket's are: a scraper's
  // account owns none, and would share with any such user.)
  size_t per_uid = 2;
  // Of max_connections, kept for root (a scraper running as root, an
  // admin's curl): users together hold the rest, however many uids (a user's
  // subordinate ones) they bring.
  size_t root_reserved = 2;
  // From accept to the reply written: a client trickling its request or not
  // reading the reply gives up its slot after this.
  int timeout_s = 10;
  // Out of descriptors, accepting pauses this long instead of retrying at once.
  int accept_pause_ms = 100;
  // Renders (a pass over every instance, on the agent's one thread) are at
  // least this far apart whoever asks: a request sooner waits, and one
  // render answers all that waited. Clients looping GET would otherwise
  // keep the thread the GPUs' ticks share.
  int min_render_interval_ms = 250;
};

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static Result<std::unique_ptr<MetricsServer>> start(event_base* base, const std::string& host,
                                                      int port, Render render,
                                                      const MetricsLimits& limits = {});
  ~MetricsServer();

  size_t connections() const { return conns_.size(); }
  // Connections closed at accept: their user already held its share.
  uint64_t rejected() const { return rejected_; }
  // Times the exposition was rendered.
  uint64_t renders() const { return renders_; }
  // The port it listens on (the one the kernel chose for port 0).
  int port() const;

 private:
  struct Connection;
  MetricsServer(event_base* base, UniqueFd fd, Render render, const MetricsLimits& limits);
  static void on_accept(evutil_socket_t fd, short what, void* arg);
  static void on_resume(evutil_socket_t fd, short what, void* arg);
  static void on_read(bufferevent* bev, void* arg);
  static void on_written(bufferevent* bev, void* arg);
  static void on_event(bufferevent* bev, short what, void* arg);
  static void on_deadline(evutil_socket_t fd, short what, void* arg);
  static void on_render_due(evutil_socket_t fd, short what, void* arg);
  void answer_waiting();
  void accept_batch();
  bool admit(int fd, Connection* c);
  void release(uid_t uid);
  void handle_request(Connection* c);
  void respond(Connection* c, int code, const char* reason, const std::string& body,
               bool head_only);
  void close_connection(Connection* c);
  void stop_listening();
  void maybe_resume();

  event_base* base_;
  UniqueFd listen_fd_;
  EventHandle listen_ev_;
  EventHandle resume_ev_;
  EventHandle render_ev_;  // the next render a waiting request is due
  int64_t last_render_ns_ = 0;
  uint64_t renders_ = 0;
  bool listening_ = false;
  Render render_;
  MetricsLimits limits_;
  // Before conns_: connections give their counts back as they go.
  // Open connections of each non-root user (the unknown count as one).
  PerUidCount per_uid_;
  size_t users_ = 0;  // connections of non-root users
  std::unordered_map<Connection*, std::unique_ptr<Connection>> conns_;
  std::optional<LoopbackPeers> peers_;  // none: sock_diag does not work here
  uint64_t rejected_ = 0;
};

}  // namespace egpu::agent
