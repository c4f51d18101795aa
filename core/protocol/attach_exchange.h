// The attach exchange, as the shim makes it: one AttachRequest on a fresh
// connection and one reply carrying three descriptors, connect, send and
// receive bounded together by one timeout (it runs inside a CUDA call).
#pragma once

#include <string>

#include "core/protocol/control_client.h"
#include "core/protocol/messages.h"
#include "core/util/unique_fd.h"

namespace egpu::protocol {

// The descriptors of an attach reply, in the order the agent sends them.
struct AttachReply {
  Reply reply;
  UniqueFd gpu_page;       // the GPU page (map read-only)
  UniqueFd instance_page;  // the instance page (map read-write)
  UniqueFd wake;           // the instance's wake channel to the agent
};
inline constexpr size_t kAttachReplyFds = 3;

// Attaches the calling process to its instance through the agent at
// `socket_path`, all within `timeout_ms`. On success the status is kOk and all
// three descriptors are valid. A reply with another status is kRefused, with
// the agent's text; anything else that goes wrong (including a kOk reply
// without exactly three descriptors) is kUnreachable. Descriptors of a reply
// that is not used are closed.
CallResult<AttachReply> request_attach(const std::string& socket_path, const AttachRequest& request,
                                       int timeout_ms);

}  // namespace egpu::protocol
