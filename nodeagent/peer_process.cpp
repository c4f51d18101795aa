#include "nodeagent/peer_process.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // <asm-generic/socket.h> of Linux 6.5; bookworm's headers lack it
#endif

namespace egpu::agent {

Result<PeerPidfd> peer_pidfd(int socket, pid_t pid) {
  int fd = -1;
  socklen_t len = sizeof fd;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0) {
    return PeerPidfd{UniqueFd(fd), PeerPidfdSource::kSocket};
  }
  const int err = errno;
  // ENOPROTOOPT: a kernel before 6.5. Anything else (ESRCH, EINVAL before
  // 6.16 for a peer already reaped) says the peer is gone.
  if (err != ENOPROTOOPT) {
    return Error{"process " + std::to_string(pid) + ", which connected, has exited (" +
                 std::strerror(err) + ")"};
  }
  const int by_pid = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (by_pid < 0) {
    return Error{"cannot watch process " + std::to_string(pid) + ": " + std::strerror(errno)};
  }
  return PeerPidfd{UniqueFd(by_pid), PeerPidfdSource::kPid};
}

}  // namespace egpu::agent
