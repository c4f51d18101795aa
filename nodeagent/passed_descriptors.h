// Descriptors clients pass the agent. The protocol never has a client send
// one, but any sender can attach some (SCM_RIGHTS) to a message on the
// control socket or a wake channel, and the agent then holds the last
// reference to files a hostile user chose. Their final close can block: a
// TCP socket set to linger on data its peer never reads waits in close()
// for as long as the linger time says, a FUSE file for its daemon's answer.
// The kernel drops descriptors a receiver has no room for, and purges a
// closed socket's queue, in the receiving process, so even "ignoring" them
// blocked the agent's only thread.
//
// So the agent asks the kernel to refuse them where it can (SO_PASSRIGHTS,
// Linux 6.16), and otherwise always receives with room for them and hands
// them to disposal workers, which turn a socket's linger off and close
// them. A client socket is shut for reading on the agent's thread (nothing
// more can be queued) and handed over too: a worker drains it and closes
// it. A close that blocks holds one worker; another starts, up to 16.
//
// Left: on kernels without SO_PASSRIGHTS a user who holds all 16 workers
// (closes that block on purpose: nested lingering sockets, a FUSE file)
// makes what it passes next wait open, and the agent's descriptors can run
// out. And before Linux 6.9 (or its backported unix GC rework) a sender may
// run the kernel's unix garbage collector synchronously once 16000
// descriptors are in flight, and that can release such a file in whichever
// process sends next, the agent included. The way out (README): peek each
// message without room (MSG_PEEK drops nothing, and says MSG_CTRUNC), and
// hand a connection that passes descriptors, unread, to a disposal process:
// any close of such a file, the agent's own copy's too, calls its flush.
#pragma once

#include <sys/socket.h>

#include <cstddef>

#include "core/util/unique_fd.h"

namespace egpu::agent {

// SO_PASSRIGHTS off on `fd` (a listening socket's accepted sockets inherit
// it); false where the kernel does not have it.
bool refuse_passed_descriptors(int fd);

// Room for the most descriptors one message can carry (SCM_MAX_FD).
struct PassedControl {
  static constexpr std::size_t kMaxFds = 253;
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(int) * kMaxFds)];
};

// Starts the first disposal worker (at the agent's start: a failure is a
// failed start, not an exception in the event loop).
bool start_disposal();

// Points `msg` at `control` before a receive.
void expect_passed(msghdr& msg, PassedControl& control);

// Disposes of the descriptors a received message carried; how many.
std::size_t dispose_passed(msghdr& msg);

// Closes a client's socket (SEQPACKET or DGRAM, or a listener): shut for
// reading here, drained of queued messages and their descriptors and
// closed by a worker.
void close_client_socket(UniqueFd fd);

// Closes `fd` on a worker: a socket a user also holds, whose queue the user
// may have filled another way (a wake channel's shim end).
void close_elsewhere(UniqueFd fd);

// Descriptors disposed of so far and how many items (descriptors, sockets
// to drain) still wait or are being closed: for tests and the status.
struct DisposalCounts {
  std::size_t disposed = 0;
  std::size_t pending = 0;
};
DisposalCounts disposal_counts();

}  // namespace egpu::agent
