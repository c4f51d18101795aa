// A file whose last close blocks, for tests of what the agent does with
// descriptors clients pass it: a TCP socket set to linger an hour on data
// its peer never reads. The peer and its listener must stay open for as long
// as the close should block.
#pragma once

#include <vector>

#include "core/util/unique_fd.h"

namespace egpu::test {

struct LingeringSocket {
  UniqueFd listener;
  UniqueFd peer;    // never reads: the unsent data stays
  UniqueFd socket;  // the one to pass; its last close blocks
};

// Invalid sockets when the loopback cannot be used.
LingeringSocket lingering_socket();

// Whether lingering sockets can be made here (the one made to see is
// closed at once, its linger turned off).
bool have_loopback();

// Sends one byte on `via` with `fd` attached (SCM_RIGHTS); false on failure.
bool send_descriptor(int via, int fd);

// Sends `fds` on `via`, one message each, back to back, so that the
// receiver's copies are the last and this process never closes one last: a
// child sends them, once this process has closed its own copies, and exits.
// Where the receiver closes first, the last close is the child's exit, and
// an exiting process's close never lingers. (Sending, then closing here,
// let a quick receiver leave this process the last close of a lingering
// socket: an hour's wait.) Where no child can be made, the copies stay open
// here until this process exits.
struct SendOutcome {
  int sent = 0;   // messages that went
  int error = 0;  // errno of the send that failed, 0 if none did
};
SendOutcome send_last_copies(int via, std::vector<UniqueFd> fds);

// One descriptor: 0 when sent, else the errno.
int send_last_copy(int via, UniqueFd fd);

}  // namespace egpu::test
