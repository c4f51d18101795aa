#include "nodeagent/peer_process.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/util/log.h"
#include "nodeagent/proc_files.h"
#include "nodeagent/process_tracker.h"

// Bookworm's headers lack it (Linux 6.5). Its number is asm-generic's only
// where the architecture takes its socket options from there; elsewhere
// (alpha, mips, parisc, sparc) the fallback by pid is used.
#if !defined(SO_PEERPIDFD) &&                                                                \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__) || \
     defined(__riscv) || defined(__loongarch__) || defined(__powerpc__))
#define SO_PEERPIDFD 77
#endif

namespace egpu::agent {
namespace {

Error gone(pid_t pid, const std::string& why) {
  return Error{"process " + std::to_string(pid) + ", which connected, " + why, ESRCH};
}

Error cannot_watch(pid_t pid, int err) {
  return Error{"cannot watch process " + std::to_string(pid) + ": " + std::strerror(err), err};
}

bool out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS;
}

}  // namespace

// A pidfd polls readable once its process has exited.
bool has_exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  int r = 0;
  do {
    r = ::poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  return r != 0;  // readable, or a pidfd poll cannot read: no live process either way
}

Result<PinnedProcess> pin_process(pid_t pid) {
  if (pid <= 0) return Error{"no process " + std::to_string(pid), ESRCH};
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    const int err = errno;
    if (err == ESRCH) return gone(pid, "has exited");
    return cannot_watch(pid, err);
  }
  PinnedProcess p{UniqueFd(fd), 0};
  // The pidfd holds one process whatever its pid does next; /proc is read
  // by pid, so what it says is that process's only if it still runs after.
  const auto status = read_proc_status(pid);
  if (!status || has_exited(p.pidfd.get())) return gone(pid, "has exited");
  p.uid = status->uid;
  return p;
}

Result<UniqueFd> peer_pidfd(int socket, pid_t pid, uid_t uid) {
#ifdef SO_PEERPIDFD
  int fd = -1;
  socklen_t len = sizeof fd;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0) {
    UniqueFd pidfd(fd);
    // Linux 6.16 and later give a pidfd even for a peer already reaped.
    if (has_exited(pidfd.get())) return gone(pid, "has exited");
    return pidfd;
  }
  const int err = errno;
#else
  (void)socket;
  const int err = ENOPROTOOPT;
#endif
  if (out_of_resources(err)) return cannot_watch(pid, err);
  // Anything but ENOPROTOOPT (no SO_PEERPIDFD) says the peer is gone:
  // ESRCH, or EINVAL before 6.16 for a peer already reaped.
  if (err != ENOPROTOOPT) return gone(pid, std::string("has exited (") + std::strerror(err) + ")");

  static std::atomic<bool> told{false};
  if (!told.exchange(true)) {
    EGPU_LOG_INFO(
        "this kernel has no SO_PEERPIDFD (Linux 6.5): attached processes are watched by pid, "
        "checked against their user");
  }
  auto pinned = pin_process(pid);
  if (!pinned) {
    if (pinned.error_code() == ESRCH) return gone(pid, "has exited");
    return cannot_watch(pid, pinned.error_code());
  }
  if (pinned->uid != uid) {
    return gone(pid, "has exited (its pid belongs to another user's process now)");
  }
  return std::move(pinned->pidfd);
}

bool peer_in_group(int socket, gid_t gid, gid_t group) {
  if (gid == group) return true;
  std::vector<gid_t> groups(64);
  auto len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
    // More than the buffer holds: len says how many bytes they need (at
    // most NGROUPS_MAX groups).
    if (errno != ERANGE) return false;
    groups.resize(len / sizeof(gid_t));
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return false;
  }
  groups.resize(len / sizeof(gid_t));
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

}  // namespace egpu::agent
