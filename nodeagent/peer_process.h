// peer_pidfd: a pidfd for the process at the other end of a Unix socket, the
// one that connected, never a later process that reuses its pid.
//
// SO_PEERCRED's pid is a number fixed at connect. A client can connect, hand
// the socket to a child and exit; once its pid is reused, an attach on that
// socket would name somebody else's process, and pidfd_open() of the number
// would watch that process instead (the slot it holds would outlive the
// client). SO_PEERPIDFD (Linux 6.5) returns a pidfd of the connecting
// process itself. Before 6.5 the pid is all there is: it is taken for the
// peer's only while its process runs as the peer's user, so a reused pid
// pins nobody else's process.
#pragma once

#include <sys/types.h>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::agent {

// `socket` is a connected Unix socket whose SO_PEERCRED are `pid` and
// `uid`. The pidfd of its live peer; an error with code ESRCH where the
// process that connected is gone (the caller refuses what it asked for),
// another code where the agent could not tell (out of descriptors).
Result<UniqueFd> peer_pidfd(int socket, pid_t pid, uid_t uid);

// A process named by pid alone (a slot of a page after a restart): a pidfd
// of the process that has the pid now, with its real uid, read while the
// pidfd shows it still running (so the pid was not yet another's). An error
// with code ESRCH where no process has the pid.
struct PinnedProcess {
  UniqueFd pidfd;
  uid_t uid = 0;
};
Result<PinnedProcess> pin_process(pid_t pid);
// Whether the process of `pidfd` has exited (a pid read before is then no
// longer known to be its).
bool has_exited(int pidfd);

// Whether the peer of the connected Unix socket `socket`, whose SO_PEERCRED
// gid is `gid`, is in group `group`: that gid or one of its supplementary
// groups, as the kernel took them at connect (SO_PEERGROUPS).
bool peer_in_group(int socket, gid_t gid, gid_t group);

}  // namespace egpu::agent
