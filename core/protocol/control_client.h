// ControlClient: one connection to the node agent's control socket, used by
// egpuctl and the SPANK plugin. Bounded waits: a dead or stuck agent is an
// error after the timeout, never a hang.
#pragma once

#include <string>
#include <vector>

#include "core/protocol/codec.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::protocol {

class ControlClient {
 public:
  static Result<ControlClient> connect(const std::string& socket_path, int timeout_ms = 5000);

  // Sends a request and returns the reply; a reply sent in several chunks
  // (kReplyMore) comes back with its text joined.
  Result<Reply> call(const Request& request);
  // Sends raw bytes (tests of malformed input) and returns the first reply.
  Result<Reply> call_raw(const std::vector<uint8_t>& bytes, uint32_t request_id);

 private:
  ControlClient(UniqueFd fd, int timeout_ms) : fd_(std::move(fd)), timeout_ms_(timeout_ms) {}
  Result<Reply> receive(uint32_t request_id);

  UniqueFd fd_;
  int timeout_ms_;
  uint32_t next_id_ = 1;
};

// Where the agent listens: $EGPU_SOCKET, else the default path.
std::string default_socket_path();

}  // namespace egpu::protocol
