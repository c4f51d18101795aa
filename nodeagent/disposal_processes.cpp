#include "nodeagent/disposal_processes.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

namespace egpu::agent {
namespace {

// Sockets a process holds, not yet closed: at most what one message
// carries (the agent sends one, then its "closed" message).
constexpr int kMaxHeld = 4;

// Closes what `held` holds: the last close of each, whatever it waits for.
void close_held(int* held, int* count) {
  for (int i = 0; i < *count; ++i)
    (void)::close(held[i]);
  *count = 0;
}

// The process: closes every socket the agent sends it, one after another,
// whatever each close waits for; exits when the agent ends its feed (or
// dies: PDEATHSIG, which the thread that starts it outlives: the agent's,
// or a closer, and closers never exit). It
// closes a socket only once the agent says it has closed its own copy (a
// byte without descriptors) or has ended the feed: closed here first, the agent's
// close would be the last. A child of a threaded process, so only system
// calls.
[[noreturn]] void run_disposal(int feed, pid_t parent) {
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(0);
  (void)::prctl(PR_SET_NAME, "egpu-dispose", 0, 0, 0);
  // The agent's handlers write to the agent's descriptors, closed below.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s)
    (void)::sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Only the feed stays open (as 0): the agent's other descriptors are
  // its own, and a copy here would outlive the agent's close.
  if (::dup2(feed, 0) != 0 || ::fcntl(0, F_SETFL, 0) != 0) _exit(1);  // it waits for the agent
  if (::syscall(SYS_close_range, 1U, ~0U, 0U) != 0) {
    for (int fd = 1; fd < 65536; ++fd)
      (void)::close(fd);
  }
  int held[kMaxHeld * 2];
  int count = 0;
  for (;;) {
    char byte;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHeld)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(0, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    bool any = false;
    for (cmsghdr* cm = n >= 0 ? CMSG_FIRSTHDR(&msg) : nullptr; cm != nullptr;
         cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t fds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < fds; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        // Never more than one message's before the agent's word; held on
        // past that would be a broken agent, whose end ends it anyway.
        if (fd >= 0 && count < kMaxHeld * 2) held[count++] = fd;
        any = true;
      }
    }
    if (any) continue;
    close_held(held, &count);  // the agent closed its copies, or ended the feed
    if (n <= 0) _exit(0);      // the end of the feed (or an error: nothing more comes)
    // Done with all it was given: the agent may end it. An answer that
    // finds no room is dropped (the agent then just keeps it).
    (void)::send(0, "d", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

bool send_fd(int feed, int fd) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  ssize_t n;
  do {
    n = ::sendmsg(feed, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

// A byte without descriptors: the agent has closed its copy of what it
// sent before (an empty message would read as the end of the feed).
bool send_closed(int feed) {
  ssize_t n;
  do {
    n = ::send(feed, "c", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

}  // namespace

DisposalProcesses::~DisposalProcesses() {
  retire_all();
}

bool DisposalProcesses::start(Process* p) {
  int ends[2];
  // Non-blocking: a full feed is a stuck process, not a wait for the agent.
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0)
    return false;
  UniqueFd feed(ends[0]);
  UniqueFd theirs(ends[1]);
  const pid_t parent = ::getpid();
  // A raw clone, as fork() without the atfork handlers of what the agent
  // loaded: the child makes system calls only.
  const auto pid = static_cast<pid_t>(
      ::syscall(SYS_clone, static_cast<long>(SIGCHLD), nullptr, nullptr, nullptr, nullptr));
  if (pid == 0) run_disposal(theirs.get(), parent);
  close_feed_(std::move(theirs));
  if (pid < 0) {
    close_feed_(std::move(feed));
    return false;
  }
  // Root may force it past the system's maximum.
  const int bytes = static_cast<int>(feed_bytes_);
  if (::setsockopt(feed.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    (void)::setsockopt(feed.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  p->pid = pid;
  p->feed = std::move(feed);
  ++started_;
  return true;
}

void DisposalProcesses::retire(std::map<uid_t, Process>::iterator it) {
  retired_.emplace_back(it->second.pid, it->first);
  // Shut at once, so it sees the end even while the closers are busy; it
  // exits once it has closed what it holds.
  (void)::shutdown(it->second.feed.get(), SHUT_RDWR);
  close_feed_(std::move(it->second.feed));
  current_.erase(it);
}

bool DisposalProcesses::idle(Process& p) {
  char answers[64];
  for (;;) {
    const ssize_t n = ::recv(p.feed.get(), answers, sizeof answers, MSG_DONTWAIT);
    if (n <= 0) break;
    ++p.answered;  // one answer per message
  }
  return p.answered == p.given;
}

bool DisposalProcesses::hand(UniqueFd& fd, uid_t uid, int64_t now) {
  reap();
  // Others' that have closed all they were given and were given nothing for
  // a while end: a process lives only while its user passes descriptors.
  // One stuck in a close is not idle.
  for (auto it = current_.begin(); it != current_.end();) {
    const auto next = std::next(it);
    if (it->first != uid && now - it->second.last_given_ns >= kIdleNs && idle(it->second))
      retire(it);
    it = next;
  }
  // A process that is stuck (its feed full) or gone gets a successor, once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto it = current_.find(uid);
    if (it == current_.end()) {
      if (alive_of(uid) >= max_per_user_) return false;
      Process p;
      if (!start(&p)) return false;
      it = current_.emplace(uid, std::move(p)).first;
    }
    if (send_fd(it->second.feed.get(), fd.get())) {
      fd.reset();  // in flight: not the last close
      it->second.last_given_ns = now;
      // Then the word that it may close it; where that cannot be sent (its
      // feed just filled), the end of the feed says so.
      if (send_closed(it->second.feed.get())) {
        ++it->second.given;
      } else {
        retire(it);
      }
      return true;
    }
    retire(it);  // stuck (its feed full) or gone
  }
  return false;
}

void DisposalProcesses::reap() {
  const auto gone = [](pid_t pid) {
    const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    return r == pid || (r < 0 && errno == ECHILD);
  };
  std::erase_if(retired_, [&](const auto& r) { return gone(r.first); });
  for (auto it = current_.begin(); it != current_.end();) {
    const auto next = std::next(it);
    if (gone(it->second.pid)) {
      close_feed_(std::move(it->second.feed));  // a unix socket's last close: off this thread
      current_.erase(it);
    }
    it = next;
  }
}

std::size_t DisposalProcesses::alive_of(uid_t uid) const {
  return current_.count(uid) +
         static_cast<std::size_t>(std::count_if(retired_.begin(), retired_.end(),
                                                [uid](const auto& r) { return r.second == uid; }));
}

std::size_t DisposalProcesses::alive() {
  reap();
  return current_.size() + retired_.size();
}

std::size_t DisposalProcesses::end_stuck(uid_t uid) {
  reap();  // those left are children not yet reaped: their pids are still theirs
  // Only where all are stuck: a hand refused because no process could be
  // started (no descriptors or processes left) leaves healthy ones be.
  if (alive_of(uid) < max_per_user_) return 0;
  if (auto it = current_.find(uid); it != current_.end()) retire(it);
  std::size_t signalled = 0;
  for (const auto& [pid, of] : retired_) {
    if (of == uid && ::kill(pid, SIGKILL) == 0) ++signalled;
  }
  return signalled;
}

void DisposalProcesses::retire_all() {
  while (!current_.empty())
    retire(current_.begin());
  reap();
}

}  // namespace egpu::agent
