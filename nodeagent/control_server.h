// ControlServer: the agent's SOCK_SEQPACKET Unix socket in the event loop. It
// accepts connections, reads one bounded message per packet, learns the
// caller from SO_PEERCRED (never from the message), hands the bytes to the
// handler and sends its replies, with descriptors as SCM_RIGHTS. It never
// blocks on a client: a client that does not read its replies is dropped.
#pragma once

#include <event2/event.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/event_handle.h"

namespace egpu::agent {

struct PeerCred {
  pid_t pid;
  uid_t uid;
  gid_t gid;
};

struct Outgoing {
  std::vector<uint8_t> bytes;
  std::vector<int> fds;  // borrowed: the server does not close them
};

class ControlServer {
 public:
  using Handler = std::function<std::vector<Outgoing>(const PeerCred&, std::span<const uint8_t>)>;

  static Result<std::unique_ptr<ControlServer>> listen(event_base* base, const std::string& path,
                                                       Handler handler);
  ~ControlServer();

  size_t connections() const { return conns_.size(); }
  uint64_t requests() const { return requests_; }
  uint64_t rejected() const { return rejected_; }

 private:
  struct Connection {
    UniqueFd fd;
    PeerCred peer;
    EventHandle ev;
    ControlServer* owner;
  };
  ControlServer(event_base* base, std::string path, UniqueFd fd, Handler handler);
  static void on_accept(evutil_socket_t fd, short what, void* arg);
  static void on_readable(evutil_socket_t fd, short what, void* arg);
  void serve(Connection* c);
  void close_connection(int fd);
  bool send(Connection* c, const Outgoing& out);

  event_base* base_;
  std::string path_;
  UniqueFd listen_fd_;
  EventHandle listen_ev_;
  Handler handler_;
  std::map<int, std::unique_ptr<Connection>> conns_;
  uint64_t requests_ = 0;
  uint64_t rejected_ = 0;
};

// Bytes a malformed request gets back; the handler builds it.
inline constexpr size_t kMaxConnections = 512;
inline constexpr int kIdleTimeoutSeconds = 30;

}  // namespace egpu::agent
