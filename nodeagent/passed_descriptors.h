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
// Linux 6.16), and otherwise always receives with room for them, turns a
// socket's linger off, and closes them on a thread of their own; a client
// socket is closed only after it is shut (nothing more can be queued) and
// its queue drained the same way.
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

// Points `msg` at `control` before a receive.
void expect_passed(msghdr& msg, PassedControl& control);

// Disposes of the descriptors a received message carried; how many.
std::size_t dispose_passed(msghdr& msg);

// Closes a client's socket (SEQPACKET or DGRAM): shut for reading, queued
// messages received and their descriptors disposed of, then closed.
void close_client_socket(UniqueFd fd);

// Descriptors disposed of so far and how many still wait for their close:
// for tests and the status.
struct DisposalCounts {
  std::size_t disposed = 0;
  std::size_t pending = 0;
};
DisposalCounts disposal_counts();

}  // namespace egpu::agent
