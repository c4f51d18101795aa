// The shim's side of the attach exchange with the node agent: one
// SOCK_SEQPACKET request, one reply carrying three descriptors. Bounded in time
// (non-blocking connect, poll with a deadline): it never hangs the program.
#pragma once

#include <cstdint>
#include <string>

#include "core/protocol/messages.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::shim {

struct AttachReply {
  protocol::Reply reply;
  UniqueFd gpu_page;       // the GPU page (map read-only)
  UniqueFd instance_page;  // the instance page (map read-write)
  UniqueFd wake;           // the instance's wake channel (see kick_agent)
};

// Why an attach failed: the agent was not there (worth retrying later), or it
// answered and said no (it will say no again).
enum class AttachFailure { kUnreachable, kRefused };

struct AttachError {
  AttachFailure kind;
  std::string message;
};

// Connects to `socket_path`, sends AttachRequest, waits at most `timeout_ms`
// in all. On success the reply status is kOk and all three descriptors are valid.
bool request_attach(const std::string& socket_path, const protocol::AttachRequest& request,
                    int timeout_ms, AttachReply* out, AttachError* error);

}  // namespace egpu::shim
