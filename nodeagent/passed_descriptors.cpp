#include "nodeagent/passed_descriptors.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "nodeagent/worker_pool.h"

namespace egpu::agent {
namespace {

// Linux 6.16's option; its asm-generic value where the headers predate it.
// Older kernels answer ENOPROTOOPT.
#if defined(SO_PASSRIGHTS)
#define EGPU_SO_PASSRIGHTS SO_PASSRIGHTS
#elif defined(__x86_64__) || defined(__aarch64__)
#define EGPU_SO_PASSRIGHTS 83
#endif

// Room for a message's credentials (SO_PASSCRED, set while draining) and
// the most descriptors it can carry: descriptors without room are dropped
// by the kernel in the receiver, here a disposal worker.
struct DrainControl {
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(ucred)) + sizeof(PassedControl::bytes)];
};

// Takes in what a shut client socket still holds, its descriptors queued
// for closing, then closes it: the close purges nothing. With SO_PASSCRED
// every message, even an empty one, comes with its sender's credentials,
// which tells it from the end of a shut SEQPACKET socket (both read 0
// bytes). A pending error (ECONNRESET) comes before the queue: go on.
void drain_and_close(int fd) {
  const int on = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  for (int i = 0; i < 1'000'000; ++i) {
    char byte;
    iovec iov{&byte, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    DrainControl control;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      // A pending error comes once, before the queue: go on. EAGAIN: a
      // datagram socket's queue is empty; anything else: nothing to read.
      if (errno == EINTR || errno == ECONNRESET || errno == EPIPE) continue;
      break;
    }
    dispose_passed(msg);
    if (n == 0 && msg.msg_controllen == 0) break;  // the end: no message, no sender
  }
  ::close(fd);
}

void close_now(int fd) {
  const linger off{0, 0};  // a socket's close then returns at once (ENOTSOCK otherwise)
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof off);
  ::close(fd);
}

// What closes what clients passed and drains client sockets: a close that
// blocks (a nested lingering socket, a FUSE file whose daemon never
// answers) holds one worker (WorkerPool). None of this runs on the agent's
// thread.
class Disposal {
 public:
  static constexpr int kMaxWorkers = 16;

  // A descriptor to close, or a client socket (already shut for reading)
  // to drain, then close. Where it cannot be queued (out of memory or
  // threads) the descriptor stays open, which blocks nothing.
  void add(int fd, bool drain) noexcept {
    const bool queued = pool_.run([fd, drain] { drain ? drain_and_close(fd) : close_now(fd); });
    if (queued && !drain) disposed_.fetch_add(1);
  }
  bool start() noexcept { return pool_.start(); }
  DisposalCounts counts() { return {disposed_.load(), pool_.pending()}; }

 private:
  WorkerPool pool_{kMaxWorkers};
  std::atomic<std::size_t> disposed_{0};
};

Disposal& disposal() {
  static auto* d = new Disposal;  // never destroyed: its workers outlive main's statics
  return *d;
}

}  // namespace

bool start_disposal() {
  return disposal().start();
}

bool refuse_passed_descriptors(int fd) {
#ifdef EGPU_SO_PASSRIGHTS
  const int off = 0;
  return ::setsockopt(fd, SOL_SOCKET, EGPU_SO_PASSRIGHTS, &off, sizeof off) == 0;
#else
  (void)fd;
  return false;
#endif
}

void expect_passed(msghdr& msg, PassedControl& control) {
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof control.bytes;
}

std::size_t dispose_passed(msghdr& msg) {
  std::size_t n = 0;
  if (msg.msg_control == nullptr || msg.msg_controllen == 0) return 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (fd >= 0) {
        disposal().add(fd, false);
        ++n;
      }
    }
  }
  return n;
}

void close_client_socket(UniqueFd fd) {
  if (!fd.valid()) return;
  // Nothing more can be queued once it is shut for reading, and the peer
  // reads the end at once (not when a worker gets to it); what is queued is
  // the workers' to take in.
  (void)::shutdown(fd.get(), SHUT_RDWR);
  disposal().add(fd.release(), true);
}

void close_elsewhere(UniqueFd fd) {
  if (fd.valid()) disposal().add(fd.release(), false);
}

DisposalCounts disposal_counts() {
  return disposal().counts();
}

}  // namespace egpu::agent
