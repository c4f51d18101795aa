// A file whose last close blocks, for tests of what the agent does with
// descriptors clients pass it: a TCP socket set to linger an hour on data
// its peer never reads. The peer and its listener must stay open for as long
// as the close should block.
#pragma once

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

}  // namespace egpu::test
