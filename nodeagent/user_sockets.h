// UserSockets: a control socket of their own for the users who own an
// instance on the node (protocol::user_socket_path: SocketPath.users/UID,
// mode 0600, the user's, in a directory of root's that no user can write,
// so none can take another's name or replace a socket, even where
// SocketPath's own directory is sticky and open to all). The public socket's backlog is everyone's:
// a user who floods it with connections keeps other users' shims from attaching, and a shim that
// cannot attach runs outside its share (FailMode=open) or not at all, and is then taken for a
// process without the shim (UnmanagedProcesses=). No other user can connect to a user's own socket,
// so filling it keeps out nobody but its owner. Served by the same handler:
// every request is authorised from SO_PEERCRED as on the public socket.
#pragma once

#include <event2/event.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "nodeagent/control_server.h"

namespace egpu::agent {

class UserSockets {
 public:
  // Connections a user may hold on its own socket (on top of the public
  // socket's): as many as there, for a many-task step's attaches at once.
  static constexpr size_t kConnectionsPerUser = 64;

  // `budget`: the requests a user is served per second, shared with the
  // public socket (ControlLimits::request_budget).
  UserSockets(event_base* base, std::string public_path, ControlServer::Handler handler,
              std::shared_ptr<RequestBudget> budget);

  // Opens a socket for each of `owners` (never root) that has none, and
  // closes those of users no longer in it. One that cannot be opened is
  // logged once; that user's clients use the public socket.
  void sync(const std::set<uid_t>& owners);

  // Sockets that a previous agent left: removed.
  static void remove_left(const std::string& public_path);

 private:
  event_base* base_;
  std::string public_path_;
  ControlServer::Handler handler_;
  std::shared_ptr<RequestBudget> budget_;
  std::map<uid_t, std::unique_ptr<ControlServer>> servers_;
  std::set<uid_t> failed_;  // logged once; tried again at each sync
  bool dir_ready_ = false;
  bool dir_failure_logged_ = false;

  // The sockets' directory made (root's, 0755) or found so; false (logged
  // once) where it cannot be: a user's, a symlink.
  bool ensure_dir();
};

}  // namespace egpu::agent
