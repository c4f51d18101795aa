#include "nodeagent/passed_descriptors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

// One thread closes what clients passed; a close that blocks holds up only
// the closes queued behind it, never the event loop.
class Disposal {
 public:
  void add(int fd) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(fd);
      ++disposed_;
      if (!started_) {
        started_ = true;
        std::thread([this] { run(); }).detach();  // lives as long as the agent
      }
    }
    cv_.notify_one();
  }
  DisposalCounts counts() {
    std::lock_guard lock(mu_);
    return {disposed_, queue_.size() + (closing_ ? 1 : 0)};
  }

 private:
  void run() {
    for (;;) {
      int fd = -1;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        fd = queue_.front();
        queue_.pop_front();
        closing_ = true;
      }
      ::close(fd);
      std::lock_guard lock(mu_);
      closing_ = false;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;
  std::size_t disposed_ = 0;
  bool closing_ = false;
  bool started_ = false;
};

Disposal& disposal() {
  static auto* d = new Disposal;  // never destroyed: its thread may outlive main's statics
  return *d;
}

void dispose(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
    const linger off{0, 0};  // close returns at once, whatever the socket still holds
    (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof off);
  }
  disposal().add(fd);
}

}  // namespace

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
  if (msg.msg_control == nullptr) return 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (fd >= 0) {
        dispose(fd);
        ++n;
      }
    }
  }
  return n;
}

void close_client_socket(UniqueFd fd) {
  if (!fd.valid()) return;
  // Nothing more can be queued once it is shut for reading; then what is
  // queued is taken with room for its descriptors, so closing purges none.
  // With SO_PASSCRED every message, even an empty one, comes with its
  // sender's credentials, which tells it from the end of a shut SEQPACKET
  // socket (both read 0 bytes).
  const int on = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  (void)::shutdown(fd.get(), SHUT_RD);
  for (;;) {
    char byte;
    iovec iov{&byte, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    PassedControl control;
    expect_passed(msg, control);
    const ssize_t n = ::recvmsg(fd.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: a datagram socket's queue is empty
    }
    dispose_passed(msg);
    if (n == 0 && msg.msg_controllen == 0) break;  // the end: no message, no sender
  }
  (void)fd.reset();
}

DisposalCounts disposal_counts() {
  return disposal().counts();
}

}  // namespace egpu::agent
