#include "core/protocol/control_client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "core/env/egpu_env_names.h"
#include "core/protocol/socket_io.h"
#include "core/protocol/unix_address.h"

namespace egpu::protocol {
namespace {

CallError unreachable(std::string message) {
  return CallError{CallFailure::kUnreachable, std::move(message)};
}

// The uid a process sees for one whose uid its user namespace does not
// map, where it is in a namespace of its own (a job in a Pyxis/enroot or
// rootless Podman container sees root's agent so); none in the initial one.
std::optional<uid_t> uid_of_the_unmapped() {
  std::ifstream map("/proc/self/uid_map");
  uint64_t inside = 0, outside = 0, count = 0;
  if (!(map >> inside >> outside >> count)) return std::nullopt;
  std::string more;
  if (inside == 0 && outside == 0 && count == 4294967295ull && !(map >> more)) return std::nullopt;
  uid_t overflow = 65534;
  std::ifstream("/proc/sys/kernel/overflowuid") >> overflow;
  return overflow;
}

}  // namespace

std::string default_socket_path() {
  const char* env = std::getenv(EGPU_ENV_SOCKET);
  return env != nullptr && *env != '\0' ? env : "/run/egpu/agent.sock";
}

CallResult<ControlClient> ControlClient::connect(const std::string& socket_path, int timeout_ms) {
  return open(socket_path, Deadline::after_ms(timeout_ms), timeout_ms, std::nullopt);
}

CallResult<ControlClient> ControlClient::connect(const std::string& socket_path,
                                                 Deadline deadline) {
  return open(socket_path, deadline, 0, deadline);
}

CallResult<ControlClient> ControlClient::connect_only(const std::string& socket_path,
                                                      int timeout_ms) {
  return connect_to(socket_path, Deadline::after_ms(timeout_ms), timeout_ms, std::nullopt);
}

std::string root_socket_path(const std::string& socket_path) {
  return socket_path + ".root";
}

std::string user_socket_dir(const std::string& socket_path) {
  return socket_path + ".users";
}

std::string user_socket_path(const std::string& socket_path, uid_t uid) {
  return user_socket_dir(socket_path) + "/" + std::to_string(uid);
}

CallResult<ControlClient> ControlClient::open(const std::string& socket_path, Deadline deadline,
                                              int timeout_ms, std::optional<Deadline> shared) {
  if (const uid_t me = ::geteuid(); me != 0) {
    // The user's own socket, with half the time at most, as root's below.
    // Only root's listener is taken there too.
    const std::string own = user_socket_path(socket_path, me);
    const Deadline half((monotonic_ns() + deadline.at_ns()) / 2);
    if (auto c = connect_to(own, half, timeout_ms, shared); c && c->peer_is_root()) return c;
  } else {
    // Root's own socket when the agent has one (a missing one fails at
    // once), with half the time at most: a root socket that does not answer
    // must leave the public one time to. Only root's listener is taken: a
    // socket planted there by a user (where SocketPath's directory is not
    // root's alone) gets nothing of root's.
    const std::string root = root_socket_path(socket_path);
    const Deadline half((monotonic_ns() + deadline.at_ns()) / 2);
    if (auto c = connect_to(root, half, timeout_ms, shared); c && c->peer_is_root()) return c;
  }
  return connect_to(socket_path, deadline, timeout_ms, shared);
}

CallResult<ControlClient> ControlClient::connect_to(const std::string& socket_path,
                                                    Deadline deadline, int timeout_ms,
                                                    std::optional<Deadline> shared) {
  auto addr = UnixAddress::of(socket_path);
  // A directory not there yet, or no descriptor free, may pass: only a path
  // that can never work is the same answer again.
  if (!addr) {
    return addr.error_code() != 0 ? unreachable(addr.error())
                                  : CallError{CallFailure::kRefused, addr.error()};
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return unreachable(std::string("socket: ") + std::strerror(errno));
  const Status connected = connect_by(fd.get(), addr->get(), addr->size(), deadline);
  if (!connected) {
    // connect() says "Connection refused" for a file that is no socket.
    struct stat st {};
    if (::stat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return unreachable("cannot reach the egpu agent at " + socket_path + ": it is " +
                         (S_ISDIR(st.st_mode) ? "a directory" : "a file") +
                         ", not a socket (is SocketPath or $EGPU_SOCKET right?)");
    }
    return unreachable("cannot reach the egpu agent at " + socket_path + ": " + connected.error() +
                       " (is egpu-agentd running?)");
  }
  // The agent runs as root (as the caller, in a test of its own): a
  // listener of any other user's is one planted where SocketPath's
  // directory, or $EGPU_SOCKET, let it be, and its replies are that user's.
  // In a user namespace that does not map root, root is the unmapped uid.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    return unreachable("cannot tell who serves " + socket_path + ": " + std::strerror(errno));
  }
  if (peer.uid != 0 && peer.uid != ::geteuid() && peer.uid != uid_of_the_unmapped()) {
    return CallError{CallFailure::kRefused, "the socket at " + socket_path + " is served by uid " +
                                                std::to_string(peer.uid) +
                                                ", not by root: it is not the egpu agent's"};
  }
  return ControlClient(std::move(fd), timeout_ms, shared);
}

bool ControlClient::peer_is_root() const {
  ucred cred{};
  socklen_t len = sizeof cred;
  return ::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
         (cred.uid == 0 || cred.uid == uid_of_the_unmapped());
}

Deadline ControlClient::call_deadline() const {
  return deadline_ ? *deadline_ : Deadline::after_ms(timeout_ms_);
}

CallResult<Reply> ControlClient::call(const Request& request) {
  auto r = call_with_fds(request);
  if (!r) return r.call_error();
  return std::move(r->reply);
}

CallResult<FdReply> ControlClient::call_with_fds(const Request& request) {
  const uint32_t id = next_id_++;
  return exchange(encode_request(request, id), id);
}

CallResult<Reply> ControlClient::call_raw(std::span<const uint8_t> bytes, uint32_t request_id) {
  auto r = exchange(bytes, request_id);
  if (!r) return r.call_error();
  return std::move(r->reply);
}

CallResult<FdReply> ControlClient::exchange(std::span<const uint8_t> bytes, uint32_t request_id) {
  const Deadline deadline = call_deadline();
  if (Status sent = send_message(fd_.get(), bytes, deadline); !sent) {
    return unreachable(sent.error());
  }
  FdReply out;
  std::vector<uint8_t> buffer(kMaxReplySize);
  for (bool first = true;; first = false) {
    auto got = receive_message(fd_.get(), buffer, deadline, &out.fds);
    if (!got) return unreachable(got.error());
    auto chunk = decode_reply(std::span(buffer.data(), *got), request_id);
    if (!chunk) return unreachable("malformed reply from the egpu agent: " + chunk.error());
    const bool more = (chunk->flags & kReplyMore) != 0;
    if (first) {
      out.reply = std::move(*chunk);
    } else {
      out.reply.text += chunk->text;
    }
    if (!more) {
      out.reply.flags = 0;
      return out;
    }
  }
}

}  // namespace egpu::protocol
