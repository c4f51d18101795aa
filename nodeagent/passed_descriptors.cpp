#include "nodeagent/passed_descriptors.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

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

// What is left to the workers: a descriptor to close, or a client socket
// (already shut for reading) to drain, then close.
struct Item {
  int fd;
  bool drain;
};

// Workers that close what clients passed and drain client sockets. A close
// that blocks (a nested lingering socket, a FUSE file whose daemon never
// answers) holds one worker; another starts when every worker is busy, up
// to kMaxWorkers. None of this runs on the agent's thread.
class Disposal {
 public:
  static constexpr int kMaxWorkers = 16;

  void add(Item item) noexcept {
    try {
      std::lock_guard lock(mu_);
      queue_.push_back(item);
      if (!item.drain) ++disposed_;
      // More queued than idle workers to take it (one may be stuck in a
      // close): another, up to the cap. A notified worker still counts as
      // waiting until it takes its item, so compare with the queue.
      if (queue_.size() > static_cast<std::size_t>(waiting_) && workers_ < kMaxWorkers) {
        start_worker();
      }
    } catch (...) {
      // Out of memory or threads: the descriptor stays open, which blocks
      // nothing; the workers already running go on.
      return;
    }
    cv_.notify_one();
  }

  // At the agent's start, so a failure to create threads is a failed start
  // and not an exception in the event loop.
  bool start() noexcept {
    try {
      std::lock_guard lock(mu_);
      if (workers_ == 0) start_worker();
      return true;
    } catch (...) {
      return false;
    }
  }

  DisposalCounts counts() {
    std::lock_guard lock(mu_);
    return {disposed_, queue_.size() + static_cast<std::size_t>(busy_)};
  }

 private:
  void start_worker() {
    std::thread([this] { run(); }).detach();  // lives as long as the agent
    ++workers_;
  }

  void run() {
    for (;;) {
      Item item{};
      {
        std::unique_lock lock(mu_);
        ++waiting_;
        cv_.wait(lock, [this] { return !queue_.empty(); });
        --waiting_;
        item = queue_.front();
        queue_.pop_front();
        ++busy_;
      }
      if (item.drain) {
        drain_and_close(item.fd);
      } else {
        const linger off{0, 0};  // a socket's close then returns at once (ENOTSOCK otherwise)
        (void)::setsockopt(item.fd, SOL_SOCKET, SO_LINGER, &off, sizeof off);
        ::close(item.fd);
      }
      std::lock_guard lock(mu_);
      --busy_;
    }
  }

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

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::size_t disposed_ = 0;
  int workers_ = 0;
  int busy_ = 0;
  int waiting_ = 0;
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
        disposal().add({fd, false});
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
  disposal().add({fd.release(), true});
}

void close_elsewhere(UniqueFd fd) {
  if (fd.valid()) disposal().add({fd.release(), false});
}

DisposalCounts disposal_counts() {
  return disposal().counts();
}

}  // namespace egpu::agent
