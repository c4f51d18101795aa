#include "nodeagent/passed_descriptors.h"

#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <map>
#include <mutex>

#include "core/util/clock.h"
#include "core/util/log.h"
#include "nodeagent/disposal_processes.h"
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

// Messages a close takes in on the agent's thread before a closer takes the
// rest. Each costs two calls, and a client can queue hundreds before it is
// accepted, then be refused at once: 64 such accepts a turn would stall the
// GPUs' ticks.
constexpr int kMaxTakenAtClose = 8;

// Closes a socket that holds nothing a user passed, off the agent's thread:
// before Linux 6.8 the last close of any unix socket runs the kernel's unix
// garbage collector in the closing process whenever descriptors are in
// flight anywhere, and a user's unreachable cycle of sockets is closed
// there, whatever that waits for. A close that blocks holds one closer;
// another starts, up to 16.
WorkerPool& closers() {
  static auto* pool = new WorkerPool(16);  // never destroyed: its workers outlive main's statics
  return *pool;
}

void close_off_thread(UniqueFd fd) {
  const int raw = fd.release();
  // Where it cannot be queued (out of memory) it stays open: that blocks
  // nothing.
  if (raw >= 0) (void)closers().run([raw] { ::close(raw); });
}

// What the agent has handed on or holds; used from the agent's thread and
// from closers (a long queue's rest), so locked.
struct Disposal {
  std::mutex mu;
  DisposalProcesses processes{&close_off_thread};
  // Sockets of users whose disposal processes are all stuck: open, shut,
  // blocking nothing; handed on with that user's next.
  std::map<uid_t, std::deque<UniqueFd>> held;
  std::size_t handed = 0;
};

Disposal& disposal() {
  static auto* d = new Disposal;  // never destroyed: its processes outlive main's statics
  return *d;
}

// Hands what `uid` has held on, oldest first; false where some stays held
// (d.mu held).
bool hand_held(Disposal& d, uid_t uid, std::deque<UniqueFd>& held) {
  while (!held.empty() && d.processes.hand(held.front(), uid, monotonic_ns())) {
    held.pop_front();
    ++d.handed;
  }
  return held.empty();
}

// Called on the agent's thread and on closers (drain_and_close).
void hand_on(UniqueFd fd, uid_t uid) {
  Disposal& d = disposal();
  std::lock_guard lock(d.mu);
  std::deque<UniqueFd>& held = d.held[uid];
  held.push_back(std::move(fd));
  if (!hand_held(d, uid, held)) {
    // All of its processes are stuck and their feeds full (thousands of
    // sockets): each socket held here is one of the agent's descriptors,
    // which the user's limit on descriptors in flight bounds only where it
    // is lower than the agent's. Killed, their closes end; the user's next
    // socket starts new ones.
    const std::size_t ended = d.processes.end_stuck(uid);
    static int64_t warned = 0;
    if (++warned % 1000 == 1) {
      EGPU_LOG_WARN(
          "uid %u: %zu sockets holding passed descriptors wait for a disposal process "
          "(its last %zu were stuck closing what it passed; %zu killed)",
          static_cast<unsigned>(uid), held.size(), DisposalProcesses::kMaxProcessesPerUser, ended);
    }
  }
  // Others' held sockets too: a user whose processes were killed may pass
  // nothing more.
  for (auto it = d.held.begin(); it != d.held.end();) {
    if (hand_held(d, it->first, it->second)) {
      it = d.held.erase(it);
    } else {
      ++it;
    }
  }
}

enum class Head { kNothing, kMessage, kDescriptors };

// What heads `fd`'s queue; SO_PASSCRED set. Every message then comes with
// its sender's credentials, even an empty one, which tells it from the end
// of a shut SEQPACKET socket (both read 0 bytes); there is room for those
// only, so descriptors leave MSG_CTRUNC and stay queued (MSG_PEEK).
Head peek_head(int fd) {
  // A pending error (ECONNRESET: a peer gone with a reply unread) comes
  // once, before the queue: look again.
  for (int i = 0; i < 8; ++i) {
    char byte;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == ECONNRESET || errno == EPIPE) continue;
      return Head::kNothing;  // EAGAIN: a datagram socket's queue is empty
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) return Head::kDescriptors;
    if (n == 0 && msg.msg_controllen == 0) return Head::kNothing;
    return Head::kMessage;
  }
  return Head::kDescriptors;  // cannot tell: handing on is safe
}

// Takes the message just peeked (one thread at a time reads a socket being
// closed: the agent's, then a closer's). A pending error can come first.
void take_head(int fd) {
  for (int i = 0; i < 8; ++i) {
    char byte;
    const ssize_t n = ::recv(fd, &byte, sizeof byte, MSG_DONTWAIT);
    if (n >= 0 || (errno != EINTR && errno != ECONNRESET && errno != EPIPE)) return;
  }
}

// Takes up to `max` messages that carry nothing from the head of `fd`'s
// queue; what heads it then (kMessage: the limit was reached).
Head take_plain(int fd, int max) {
  for (int i = 0; i < max; ++i) {
    const Head head = peek_head(fd);
    if (head != Head::kMessage) return head;
    take_head(fd);
  }
  return Head::kMessage;
}

// The rest of a long queue, taken on a closer: a socket is handed on only
// where something queued carries descriptors. One that carries none pins
// none of its user's descriptors in flight, so nothing would bound how many
// a user could have the agent hold once its disposal processes are stuck
// (connect, send a few messages, close: refused, and handed on).
void drain_and_close(UniqueFd fd, uid_t uid) {
  // Shut: the queue only shrinks. The bound is for a kernel that lets a
  // sender queue on regardless.
  if (take_plain(fd.get(), 1 << 20) != Head::kNothing) hand_on(std::move(fd), uid);
  // Otherwise closed here, on a closer.
}

void drain_off_thread(UniqueFd fd, uid_t uid) {
  const int raw = fd.release();
  // Where it cannot be queued (out of memory) it stays open, as in
  // close_off_thread.
  if (raw >= 0) (void)closers().run([raw, uid] { drain_and_close(UniqueFd(raw), uid); });
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

ssize_t receive_without_descriptors(int fd, msghdr& msg, int flags, bool* passes_descriptors) {
  *passes_descriptors = false;
  msg.msg_control = nullptr;  // no room: nothing is installed, nothing dropped
  msg.msg_controllen = 0;
  msg.msg_flags = 0;
  const ssize_t n = ::recvmsg(fd, &msg, flags | MSG_PEEK);
  if (n < 0) return n;
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    *passes_descriptors = true;
    return n;
  }
  take_head(fd);
  return n;
}

void close_client_socket(UniqueFd fd, uid_t uid) {
  if (!fd.valid()) return;
  // Nothing more can be queued once it is shut for reading; what is, is
  // taken in here where it carries no descriptors.
  (void)::shutdown(fd.get(), SHUT_RDWR);
  const int on = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  switch (take_plain(fd.get(), kMaxTakenAtClose)) {
    case Head::kNothing:
      close_off_thread(std::move(fd));  // its queue is empty and stays so
      return;
    case Head::kDescriptors:
      hand_on(std::move(fd), uid);
      return;
    case Head::kMessage:
      drain_off_thread(std::move(fd), uid);  // more than the agent's thread takes
      return;
  }
}

void close_shared_socket(UniqueFd fd, uid_t uid) {
  if (!fd.valid()) return;
  // Nothing more can be queued once it is shut for reading. While it is
  // still connected to an unnamed socket, that is the one it was made with
  // (connect needs a name, and none can be given to it again): only that
  // peer, the agent's, could ever send to it. Otherwise its queue is never
  // looked at (the user may read it, or set its peek offset, meanwhile).
  (void)::shutdown(fd.get(), SHUT_RDWR);
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
      peer.ss_family == AF_UNIX && len == sizeof(sa_family_t)) {
    close_off_thread(std::move(fd));
    return;
  }
  hand_on(std::move(fd), uid);
}

void close_elsewhere(UniqueFd fd, uid_t uid) {
  if (fd.valid()) hand_on(std::move(fd), uid);
}

bool start_disposal() {
  return closers().start();
}

DisposalCounts disposal_counts() {
  Disposal& d = disposal();
  std::lock_guard lock(d.mu);
  DisposalCounts c;
  c.handed = d.handed;
  for (const auto& [uid, fds] : d.held)
    c.held += fds.size();
  c.processes = d.processes.alive();
  return c;
}

}  // namespace egpu::agent
