// peer_pidfd: a pidfd for the process at the other end of a Unix socket, the
// one that connected, never a later process that reuses its pid.
//
// SO_PEERCRED's pid is a number fixed at connect. A client can connect, hand
// the socket to a child and exit; once its pid is reused, an attach on that
// socket would name somebody else's process, and pidfd_open() of the number
// would watch that process instead (the slot it holds would outlive the
// client). SO_PEERPIDFD (Linux 6.5) returns a pidfd of the connecting
// process itself: already readable when that process has exited, so the
// agent reclaims the slot at once.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::agent {

// How the pidfd was had: from the socket, or (a kernel without
// SO_PEERPIDFD) by pid, which is only as good as the pid still being the
// peer's.
enum class PeerPidfdSource { kSocket, kPid };

struct PeerPidfd {
  UniqueFd fd;
  PeerPidfdSource source;
};

// `socket` is a connected Unix socket whose SO_PEERCRED pid is `pid`. An
// error says the connecting process is gone (or cannot be watched): the
// caller refuses what it asked for.
Result<PeerPidfd> peer_pidfd(int socket, pid_t pid);

}  // namespace egpu::agent
