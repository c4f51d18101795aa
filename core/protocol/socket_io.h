// The socket calls under the control client, each bounded by one Deadline:
// a non-blocking connect whose outcome is read from SO_ERROR, one message
// sent without SIGPIPE, one message received with the descriptors it carries.
// EINTR and EAGAIN are waited out until the deadline; nothing here throws by
// itself (the shim runs it inside arbitrary programs). Errors are plain text
// about "the agent": the control socket is all this is for.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/util/deadline.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::protocol {

// Connects the non-blocking socket `fd` to `addr` by `deadline`. A connect in
// progress (EINPROGRESS, EINTR) is polled for and its outcome read from
// SO_ERROR; a full listen backlog (EAGAIN on a Unix socket: nothing to poll
// for) is tried again every few milliseconds. The error is the reason alone
// ("Connection refused", "timed out ..."): the caller names the peer.
Status connect_by(int fd, const sockaddr* addr, socklen_t addr_len, Deadline deadline);

// Sends `bytes` as one message (SOCK_SEQPACKET: all or nothing) by `deadline`,
// with MSG_NOSIGNAL: a peer that is gone is an error, never a SIGPIPE.
Status send_message(int fd, std::span<const uint8_t> bytes, Deadline deadline);

// Receives one message into `buffer` by `deadline` and returns its length.
// Descriptors that came with it (SCM_RIGHTS, up to kMaxReplyFds, close-on-exec)
// are appended to `fds` before anything else is looked at, so they are owned,
// and closed with `fds`, whatever is wrong with the message. A message longer
// than `buffer` (MSG_TRUNC), more descriptors than fit (MSG_CTRUNC) and a peer
// that closed (length 0) are errors.
Result<size_t> receive_message(int fd, std::span<uint8_t> buffer, Deadline deadline,
                               std::vector<UniqueFd>* fds);

}  // namespace egpu::protocol
