// Descriptors clients pass the agent. The protocol never has a client send
// one, but any sender can attach some (SCM_RIGHTS) to a message on the
// control socket or a wake channel. Whichever process closes such a file
// last runs what its close waits for: a TCP socket set to linger on data
// its peer never reads waits for as long as the linger time says, a FUSE
// file for its daemon's answer to its flush (which every close of it
// sends, not only the last). The kernel installs them in a receiver that
// has room, drops them in one that has none (the drop is a close), and
// purges a closed socket's queue (closes too) in the process that closes
// it last. Any of these on the agent's only thread would stop it.
//
// So the agent asks the kernel to refuse them where it can (SO_PASSRIGHTS,
// Linux 6.16: the sender gets EPERM). Otherwise the agent never takes one
// in and never closes a socket that holds one:
// - each message is peeked first without room for descriptors (MSG_PEEK
//   leaves them queued, MSG_CTRUNC tells they are there) and taken only
//   where it carries none;
// - a socket is shut (nothing more can be queued), and what is queued is
//   peeked and taken the same way (past a few messages, on a closer
//   thread); one that holds descriptors is handed, unread, to a disposal
//   process of its user's, which closes it last. One that holds none is
//   never handed on.
// The agent's copy of a handed socket is closed once it is in flight to
// that process: a close that is not the last purges nothing.
//
// Each user has one disposal process at a time; it ends once it has
// closed all it was given, was handed nothing for DisposalProcesses::kIdleNs
// and another user's is needed. Where it is stuck on a
// close and its feed is full, the agent starts it a successor, up to
// DisposalProcesses::kMaxProcessesPerUser alive; past that the user's
// sockets stay open in the agent (shut) and its stuck processes are killed
// (an exiting process's close does not linger), and new ones take what was
// held. Filling a feed takes thousands of sockets, each pinning one of the
// user's descriptors in flight, which the kernel bounds per user
// (RLIMIT_NOFILE): a user blocks only its own disposals. "User" is what the control server counts a
// connection as: uids that own no instance on the node are one user there (one with subordinate
// uids would otherwise have processes for each), so one of them can hold up the others' disposals,
// not an instance owner's.
//
// A socket the user also holds (a wake channel's shim end) is never
// peeked: the user could read it, or set its peek offset, meanwhile. It is
// closed here only while it is still connected to the agent's end, which
// never sends; otherwise it is handed on.
//
// Sockets that hold nothing are closed off the agent's thread too: before
// Linux 6.8 the last close of any unix socket runs the kernel's unix
// garbage collector in the closing process whenever descriptors are in
// flight, and that closes a user's unreachable cycles of sockets there.
//
// Left: processes stuck in a FUSE flush its daemon has read may not die;
// a user who makes the garbage collector block 16 closers (before
// 6.8) makes the sockets the agent closes after that wait open in the
// closers' queue; and before 6.9 a sender may run the collector
// synchronously once 16000 descriptors are in flight, in whichever process
// sends next, the agent included.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>

#include "core/util/unique_fd.h"

namespace egpu::agent {

// SO_PASSRIGHTS off on `fd` (a listening socket's accepted sockets inherit
// it); false where the kernel does not have it.
bool refuse_passed_descriptors(int fd);

// Receives the message at the head of `fd`'s queue into `msg` (its iovecs;
// its control is not used) as recvmsg(fd, msg, flags) would, but only
// where it carries no descriptors; where it does, it stays queued and
// `*passes_descriptors` is set (the return value is then the peeked
// length). `flags` must not hold MSG_PEEK.
ssize_t receive_without_descriptors(int fd, msghdr& msg, int flags, bool* passes_descriptors);

// For a socket whose user could not be told (SO_PEERCRED failed).
inline constexpr uid_t kUnknownUid = static_cast<uid_t>(-1);

// Closes a client's socket (SEQPACKET or DGRAM) of `uid`'s: shut, what is
// queued without descriptors taken in here, and, where something queued
// carries descriptors, handed to `uid`'s disposal process.
void close_client_socket(UniqueFd fd, uid_t uid);

// Closes a socket of `uid`'s that the user holds too (a wake channel's
// shim end): never peeked (see above).
void close_shared_socket(UniqueFd fd, uid_t uid);

// Hands `fd` to `uid`'s disposal process, which closes it last, whatever
// that waits for: a listening socket (its unaccepted connections' queues).
void close_elsewhere(UniqueFd fd, uid_t uid);

// Starts the first closer thread (at the agent's start: a failure is a
// failed start, not an exception in the event loop).
bool start_disposal();

// What the agent handed to disposal processes so far, what it holds
// because a user's processes are all stuck, and the disposal processes
// alive: for tests and the status.
struct DisposalCounts {
  std::size_t handed = 0;
  std::size_t held = 0;
  std::size_t processes = 0;
};
DisposalCounts disposal_counts();

}  // namespace egpu::agent
