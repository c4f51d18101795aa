// ControlClient: one connection to the node agent's control socket, the one
// client of it (egpuctl, the SPANK plugin, the shim's attach, tests). Every
// call is bounded by a deadline: a dead or stuck agent is an error when it
// passes, never a hang. Nothing here throws by itself, and a failure says
// whether asking again later may help.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/protocol/codec.h"
#include "core/util/deadline.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::protocol {

// Why a call failed.
enum class CallFailure {
  // No agent at the path, or it closed, stalled past the deadline or sent
  // something unusable: worth trying again later.
  kUnreachable,
  // Asking again gets the same answer: the agent said no (a reply with a
  // status other than kOk, where the call requires kOk), or the request
  // cannot be made at all (a socket path no address can reach).
  kRefused,
};

struct CallError {
  CallFailure kind;
  std::string message;
};

// A Result whose error also carries its CallFailure. It is a Result<T>, so
// callers that only want the message keep using it as one.
template <typename T>
class [[nodiscard]] CallResult : public Result<T> {
 public:
  CallResult(T value) : Result<T>(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  CallResult(CallError error)                           // NOLINT(google-explicit-constructor)
      : Result<T>(Error{std::move(error.message)}), failure_(error.kind) {}

  // Meaningful only when !ok().
  CallFailure failure() const { return failure_; }
  // The error again, to return as another CallResult's.
  CallError call_error() const { return {failure_, this->error()}; }

 private:
  CallFailure failure_ = CallFailure::kUnreachable;
};

// A reply and the descriptors that came with it (SCM_RIGHTS), in the order the
// agent sent them; they are owned here and closed with it.
struct FdReply {
  Reply reply;
  std::vector<UniqueFd> fds;
};

class ControlClient {
 public:
  static constexpr int kDefaultTimeoutMs = 5000;

  // Connects within `timeout_ms`; each call after it then has `timeout_ms` of
  // its own, from when it starts (a connection kept for several requests).
  static CallResult<ControlClient> connect(const std::string& socket_path,
                                           int timeout_ms = kDefaultTimeoutMs);
  // Connects by `deadline`, which every call after it shares: connect, send
  // and receive bounded together (a one-shot exchange).
  static CallResult<ControlClient> connect(const std::string& socket_path, Deadline deadline);
  // To `socket_path` alone, never root's or the caller's own socket beside
  // it (tests of what the public socket does).
  static CallResult<ControlClient> connect_only(const std::string& socket_path,
                                                int timeout_ms = kDefaultTimeoutMs);

  // Sends a request and returns the reply, whatever its status (a status is
  // the agent's answer, not a failure of the call); a reply sent in several
  // chunks (kReplyMore) comes back with its text joined and flags 0. Any
  // descriptors that came with it are closed.
  CallResult<Reply> call(const Request& request);
  // The same, keeping the descriptors.
  CallResult<FdReply> call_with_fds(const Request& request);
  // Sends raw bytes (tests of malformed input) and returns the reply to `request_id`.
  CallResult<Reply> call_raw(std::span<const uint8_t> bytes, uint32_t request_id);

 private:
  ControlClient(UniqueFd fd, int timeout_ms, std::optional<Deadline> deadline)
      : fd_(std::move(fd)), timeout_ms_(timeout_ms), deadline_(deadline) {}
  static CallResult<ControlClient> open(const std::string& socket_path, Deadline deadline,
                                        int timeout_ms, std::optional<Deadline> shared);
  static CallResult<ControlClient> connect_to(const std::string& socket_path, Deadline deadline,
                                              int timeout_ms, std::optional<Deadline> shared);
  Deadline call_deadline() const;
  // The listener is root's (from SO_PEERCRED; in a user namespace that does
  // not map root, the unmapped uid is root's).
  bool peer_is_root() const;
  CallResult<FdReply> exchange(std::span<const uint8_t> bytes, uint32_t request_id);

  UniqueFd fd_;
  int timeout_ms_;
  std::optional<Deadline> deadline_;  // set: shared by every call
  uint32_t next_id_ = 1;
};

// Where the agent listens: $EGPU_SOCKET, else the default path.
std::string default_socket_path();

// The agent's root-only socket beside `socket_path` (mode 0600): its
// backlog is root's alone, so a user flooding the public socket with
// connections cannot keep slurmstepd out. Root's connections go there
// first, and to the public socket when it is missing (an older agent).
std::string root_socket_path(const std::string& socket_path);

// A user's own socket, in a directory of root's beside `socket_path`
// (SocketPath.users/UID, mode 0600, the user's), there while the user owns
// an instance on the node: no other user can connect to it, so one flooding
// the public socket cannot keep that user's shims from attaching (and so
// from being taken for processes without the shim). A user's connections go
// there first, and to the public socket when it is missing (no instance
// yet, an older agent) or does not answer in time.
std::string user_socket_path(const std::string& socket_path, uid_t uid);
std::string user_socket_dir(const std::string& socket_path);

}  // namespace egpu::protocol
