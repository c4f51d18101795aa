// ControlServer: the agent's SOCK_SEQPACKET Unix socket in the event loop. It
// accepts connections, reads one bounded message per packet, learns the
// caller from SO_PEERCRED (never from the message), hands the bytes to the
// handler and sends its replies, with descriptors as SCM_RIGHTS. It never
// blocks on a client: replies its socket has no room for wait in the agent
// (bounded) and go as it reads; past the bound the client is dropped.
//
// Every job user can connect (shims run as the job's user), so connections
// are a shared resource a hostile user could hoard. Each uid but root gets a
// bounded share of them, some are kept for root alone, and a user's
// connection lives a bounded time however busy it keeps it. Uids that own
// no instance on the node share one uid's share: a user with subordinate
// uids (/etc/subuid) would otherwise get a share for each. Those bounds
// count accepted connections; the kernel's backlog in front of them is
// everyone's, so the agent also listens on a root-only socket
// (protocol::root_socket_path) whose backlog no user can fill: slurmstepd's
// create and remove always get through.
#pragma once

#include <event2/event.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/util/per_uid_count.h"
#include "core/util/request_budget.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/event_handle.h"

namespace egpu::agent {

struct PeerCred {
  pid_t pid;
  uid_t uid;
  gid_t gid;
  // The connection's socket, borrowed for the handler's call: an attach
  // asks it for the connecting process's pidfd (peer_process.h).
  int socket = -1;
};

struct Outgoing {
  std::vector<uint8_t> bytes;
  std::vector<int> fds;  // borrowed: the server does not close them
};

// The defaults are the agent's; tests shorten the times.
struct ControlLimits {
  // All connections together: far below the agent's descriptor limit
  // (LimitNOFILE=65536 in the unit), which pages and pidfds share.
  size_t max_connections = 512;
  // Slots only root may take: users together get max_connections minus these.
  size_t root_reserved = 64;
  // Per non-root uid (uids that own no instance here: for all of them
  // together, see set_tenant_check). Honest clients (shims, egpuctl) connect, send one or a
  // few requests and close, so a uid rarely has more than a handful open; 64
  // leaves room for a many-task step whose tasks all attach at once.
  size_t per_uid = 64;
  // Without a request for this long a connection is closed (root's too).
  int idle_timeout_s = 30;
  // A non-root connection is closed this long after accept however active:
  // requests must not keep a slot forever. Root (slurmstepd) is exempt.
  int lifetime_s = 60;
  // Out of descriptors, accepting pauses this long instead of retrying at once.
  int accept_pause_ms = 100;
  // Only root is served (the root socket; its mode already keeps others out).
  bool root_only = false;
  // Only root and this uid are served (a user's own socket: likewise).
  std::optional<uid_t> only_uid;
  // Reply bytes a connection may have waiting in the agent while its socket's
  // buffer is full (a status of a node with many instances), those of one
  // non-root uid's connections, and all non-root connections together; past
  // them the connection is closed.
  size_t max_waiting_bytes = 16u << 20;
  size_t per_uid_max_waiting_bytes = 16u << 20;
  size_t users_max_waiting_bytes = 64u << 20;
  // What each non-root user's requests may take, shared by the servers that
  // hold the same budget (the public socket and the users' own): a request
  // costs a token, and one more for each `bytes_per_token` of its replies
  // (building them is the agent's work). A connection whose user has no
  // token is read again once it has. None: no bound.
  std::shared_ptr<RequestBudget> request_budget;
  size_t bytes_per_token = 4096;
};

class ControlServer {
 public:
  using Handler = std::function<std::vector<Outgoing>(const PeerCred&, std::span<const uint8_t>)>;

  // `mode`: the socket file's; 0666 lets every job user connect, 0600 only
  // root (connecting needs write permission on it), or `owner` if given.
  static Result<std::unique_ptr<ControlServer>> listen(event_base* base, const std::string& path,
                                                       Handler handler,
                                                       const ControlLimits& limits = {},
                                                       mode_t mode = 0666,
                                                       std::optional<uid_t> owner = std::nullopt);
  ~ControlServer();

  // Whether `uid` owns an instance here (asked at accept). Connections of
  // uids that do not count together, as those of one uid (kStrangers), and
  // what they pass goes to that one uid's disposal processes
  // (passed_descriptors.h). Unset: every uid counts for itself.
  void set_tenant_check(std::function<bool(uid_t)> is_tenant) { is_tenant_ = std::move(is_tenant); }
  // Members of `gid` (the peer's group or one of its supplementary groups, as
  // its socket holds them from connect) count for themselves even where they
  // own no instance: a monitoring account that runs egpuctl on every node.
  void set_monitor_group(gid_t gid) { monitor_gid_ = gid; }
  // What the connections of uids that own no instance count as. A real uid
  // of that number (-2) would count with them, which costs it a share of
  // its own, nothing more.
  static constexpr uid_t kStrangers = static_cast<uid_t>(-2);

  size_t connections() const { return conns_.size(); }
  uint64_t requests() const { return requests_; }
  // Connections closed at accept: over a cap, or no credentials.
  uint64_t rejected() const { return rejected_; }

 private:
  struct Connection {
    UniqueFd fd;
    PeerCred peer;
    uid_t counted_as = 0;  // peer.uid, or kStrangers
    EventHandle ev;
    ControlServer* owner;
    timespec deadline;  // end of the lifetime; unused for root
    // Not read while its last reply is unread (see serve); since when (or
    // since the last of its waiting replies was sent).
    bool parked = false;
    int64_t parked_ns = 0;
    // Parked because its user had no request left in its budget: read again
    // once it has (see sweep).
    bool throttled = false;
    // Replies its socket had no room for, in order (never descriptors).
    std::deque<std::vector<uint8_t>> waiting;
    size_t waiting_bytes = 0;
  };
  enum class Sent { kAll, kNoRoom, kFailed };
  // A closed connection whose reply its peer has not read: the reply's
  // memory is the agent's socket's, pinned by the peer for as long as it
  // keeps its end, so the socket still counts against its uid until then.
  struct Unread {
    UniqueFd fd;
    uid_t counted_as;  // never root's (root's replies pin nothing of a user's)
  };
  ControlServer(event_base* base, std::string path, UniqueFd fd, Handler handler,
                const ControlLimits& limits);
  static void on_accept(evutil_socket_t fd, short what, void* arg);
  static void on_resume(evutil_socket_t fd, short what, void* arg);
  static void on_readable(evutil_socket_t fd, short what, void* arg);
  static void on_sweep(evutil_socket_t fd, short what, void* arg);
  bool park(Connection* c);
  // Whether `c`'s user may be served what it sent now (root always, and a
  // close or error, which serve() handles); false parks it until it may.
  bool within_budget(Connection* c);
  bool sweep_in(int64_t ns);
  void sweep();
  void accept_batch();
  // Whether `peer` may have one more connection; `counted_as` what it
  // counts as (see set_tenant_check).
  bool admit(const PeerCred& peer, uid_t* counted_as);
  void pause_accepting(int err);
  bool serve(Connection* c);
  bool arm(Connection* c);
  void close_connection(int fd);
  Sent send(Connection* c, std::span<const uint8_t> bytes, std::span<const int> fds);
  bool keep_waiting(Connection* c, std::vector<Outgoing>& replies, size_t from);
  bool send_waiting(Connection* c);
  bool should_warn();

  event_base* base_;
  std::string path_;
  UniqueFd listen_fd_;
  EventHandle listen_ev_;
  EventHandle resume_ev_;  // re-enables accepting after a pause
  Handler handler_;
  ControlLimits limits_;
  std::function<bool(uid_t)> is_tenant_;
  std::optional<gid_t> monitor_gid_;
  std::map<int, std::unique_ptr<Connection>> conns_;
  std::vector<Unread> unread_;
  EventHandle sweep_ev_;      // looks at parked connections and unread_ while there are any
  int64_t sweep_due_ns_ = 0;  // when sweep_ev_ fires (CLOCK_MONOTONIC), while pending
  PerUidCount per_uid_;       // open connections of each non-root uid (or kStrangers)
  size_t non_root_ = 0;
  size_t users_waiting_bytes_ = 0;  // Connection::waiting of non-root connections
  std::unordered_map<uid_t, size_t> waiting_bytes_of_;  // the same, per counted uid (none: 0)
  void count_waiting(uid_t uid, size_t added, size_t taken);
  uint64_t requests_ = 0;
  uint64_t rejected_ = 0;
  int64_t last_warn_ns_ = 0;
};

}  // namespace egpu::agent
