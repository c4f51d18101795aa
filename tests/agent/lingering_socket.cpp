#include "tests/agent/lingering_socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace egpu::test {

LingeringSocket lingering_socket() {
  LingeringSocket l;
  l.listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int small = 4096;  // inherited by the accepted peer: its window closes soon
  ::setsockopt(l.listener.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(l.listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(l.listener.get(), 1) != 0 ||
      ::getsockname(l.listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return {};
  }
  l.socket.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(l.socket.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return {};
  l.peer.reset(::accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!l.peer.valid()) return {};
  // Fill everything up to the peer's closed window; the FIN then waits behind it.
  ::fcntl(l.socket.get(), F_SETFL, O_NONBLOCK);
  char chunk[65536];
  std::memset(chunk, 'x', sizeof chunk);
  for (int i = 0; i < 100'000; ++i) {
    if (::send(l.socket.get(), chunk, sizeof chunk, MSG_NOSIGNAL) < 0) break;
  }
  const linger an_hour{1, 3600};
  ::setsockopt(l.socket.get(), SOL_SOCKET, SO_LINGER, &an_hour, sizeof an_hour);
  return l;
}

bool have_loopback() {
  LingeringSocket probe = lingering_socket();
  if (!probe.socket.valid()) return false;
  const linger off{0, 0};
  return ::setsockopt(probe.socket.get(), SOL_SOCKET, SO_LINGER, &off, sizeof off) == 0;
}

bool send_descriptor(int via, int fd) {
  char byte = 'x';
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  return ::sendmsg(via, &msg, MSG_NOSIGNAL) == 1;
}

SendOutcome send_last_copies(int via, std::vector<UniqueFd> fds) {
  // The child sends only once this process's copies are closed (the end of
  // `closed`): a child that sent and exited first would leave the last
  // close here again. It reports on `result`.
  int closed[2];
  int result[2];
  if (::pipe2(closed, O_CLOEXEC) != 0) return {0, errno};
  if (::pipe2(result, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(closed[0]);
    ::close(closed[1]);
    return {0, error};
  }
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    for (int fd : {closed[0], closed[1], result[0], result[1]})
      ::close(fd);
    // Kept open until this process exits, whose close never lingers.
    for (UniqueFd& fd : fds)
      (void)fd.release();
    return {0, error};
  }
  if (child == 0) {
    ::close(closed[1]);
    ::close(result[0]);
    char byte;
    while (::read(closed[0], &byte, 1) < 0 && errno == EINTR) {
    }
    SendOutcome out;
    for (const UniqueFd& fd : fds) {
      if (!send_descriptor(via, fd.get())) {
        out.error = errno;
        break;
      }
      ++out.sent;
    }
    (void)!::write(result[1], &out, sizeof out);
    _exit(0);
  }
  ::close(closed[0]);
  ::close(result[1]);
  fds.clear();
  ::close(closed[1]);
  SendOutcome out{0, EIO};
  ssize_t got;
  while ((got = ::read(result[0], &out, sizeof out)) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof out)) out = {0, EIO};
  ::close(result[0]);
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  return out;
}

int send_last_copy(int via, UniqueFd fd) {
  std::vector<UniqueFd> one;
  one.push_back(std::move(fd));
  return send_last_copies(via, std::move(one)).error;
}

}  // namespace egpu::test
