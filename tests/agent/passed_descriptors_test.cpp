// Descriptors a client passes: never taken in, nor closed last, on the
// receiving thread (nodeagent/passed_descriptors.h). Each receiver runs in
// a child, so a receiver that blocks fails the test instead of hanging it,
// and this process never closes its copy of a socket that holds one.
#include "nodeagent/passed_descriptors.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "tests/agent/lingering_socket.h"

namespace egpu::agent {
namespace {

using test::have_loopback;
using test::lingering_socket;
using test::LingeringSocket;
using test::send_descriptor;

constexpr uid_t kUser = 1001;
constexpr uid_t kOtherUser = 1002;

// Runs `body` in a child; true when it exits 0 within `limit`.
bool finishes(const std::function<int()>& body, std::chrono::seconds limit) {
  const pid_t child = ::fork();
  if (child == 0) _exit(body());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A pair of `type`: what `sender` sends queues at `receiver`.
struct Pair {
  UniqueFd receiver;
  UniqueFd sender;
};
Pair pair_of(int type) {
  int ends[2];
  if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, ends) != 0) return {};
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

// Queues a lingering socket at `p.receiver`, whose copy there is then the
// last: its close would block for an hour. The peer stays in `held`.
bool queue_lingering(const Pair& p, std::vector<LingeringSocket>* held) {
  held->push_back(lingering_socket());
  LingeringSocket& l = held->back();
  if (!l.socket.valid() || !send_descriptor(p.sender.get(), l.socket.get())) return false;
  l.socket.reset();
  return true;
}

// Whether every copy of a pipe's write end has been closed within `limit`:
// its read end `fd` then reads the end.
bool write_end_closed(int fd, std::chrono::seconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count() * 1000)) != 1) return false;
  char byte;
  return ::read(fd, &byte, 1) == 0;
}

std::size_t open_descriptors() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d))
    n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

bool handed(std::size_t before, std::size_t count) {
  const DisposalCounts c = disposal_counts();
  return c.handed == before + count && c.held == 0;
}

TEST(PassedDescriptors, AMessageThatCarriesDescriptorsIsNotTakenIn) {
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  std::vector<LingeringSocket> held;
  Pair p = pair_of(SOCK_SEQPACKET);
  ASSERT_TRUE(p.receiver.valid());
  ASSERT_EQ(::send(p.sender.get(), "ab", 2, 0), 2);
  ASSERT_TRUE(queue_lingering(p, &held));
  EXPECT_TRUE(finishes(
      [&] {
        char buf[16];
        iovec iov{buf, sizeof buf};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        bool passes = true;
        // The plain message first, taken in.
        if (receive_without_descriptors(p.receiver.get(), msg, MSG_DONTWAIT, &passes) != 2 ||
            passes || std::memcmp(buf, "ab", 2) != 0) {
          return 2;
        }
        // Then the one with the socket: left queued, however often it is looked at.
        for (int i = 0; i < 2; ++i) {
          if (receive_without_descriptors(p.receiver.get(), msg, MSG_DONTWAIT, &passes) != 1 ||
              !passes) {
            return 3;
          }
        }
        return 0;
      },
      std::chrono::seconds(30)));
  (void)p.receiver.release();  // never closed here: its close would block
}

// Closing a client's socket takes in what carries nothing (an empty message
// does not end it early) and hands the socket on at the first message that
// carries descriptors.
TEST(PassedDescriptors, ClosingAClientSocketHandsOnWhatCarriesDescriptors) {
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  for (int type : {SOCK_SEQPACKET, SOCK_DGRAM}) {
    // All in the child: the copy it closes is its only one, so a close
    // here would block it.
    EXPECT_TRUE(finishes(
        [&] {
          std::vector<LingeringSocket> held;
          Pair p = pair_of(type);
          if (!p.receiver.valid() || ::send(p.sender.get(), "", 0, 0) != 0 ||
              ::send(p.sender.get(), "ab", 2, 0) != 2 || !queue_lingering(p, &held)) {
            return 3;
          }
          close_client_socket(std::move(p.receiver), kUser);
          return handed(0, 1) ? 0 : 2;
        },
        std::chrono::seconds(30)))
        << (type == SOCK_DGRAM ? "datagram" : "seqpacket");
  }
}

// A socket with nothing passed is closed in the agent (on a closer thread):
// no process is started.
TEST(PassedDescriptors, ASocketThatHoldsNoDescriptorsIsNotHandedOn) {
  Pair p = pair_of(SOCK_SEQPACKET);
  ASSERT_TRUE(p.receiver.valid());
  ASSERT_EQ(::send(p.sender.get(), "request", 7, 0), 7);
  ASSERT_EQ(::send(p.sender.get(), "", 0, 0), 0);
  EXPECT_TRUE(finishes(
      [&] {
        close_client_socket(std::move(p.receiver), kUser);
        const DisposalCounts c = disposal_counts();
        // The peer reads the end (shut at once, closed soon after).
        char byte;
        const bool gone = ::recv(p.sender.get(), &byte, 1, MSG_DONTWAIT) == 0;
        return c.handed == 0 && c.processes == 0 && gone ? 0 : 2;
      },
      std::chrono::seconds(30)));
}

// Past the few messages a close takes in on the agent's thread, a closer
// takes the rest: a socket whose queue carries no descriptors is never
// handed on (it would pin none of its user's descriptors in flight, so
// nothing bounded how many the agent held once the user's disposal
// processes were stuck), and one whose queue carries some further on still is.
TEST(PassedDescriptors, ALongQueueIsHandedOnOnlyWhereItCarriesDescriptors) {
  constexpr int kPlain = 40;
  EXPECT_TRUE(finishes(
      [&] {
        Pair p = pair_of(SOCK_SEQPACKET);
        if (!p.receiver.valid()) return 3;
        for (int i = 0; i < kPlain; ++i) {
          if (::send(p.sender.get(), "request", 7, 0) != 7) return 4;
        }
        close_client_socket(std::move(p.receiver), kUser);
        // Queued bytes are freed once taken or purged.
        for (;;) {
          int queued = 0;
          if (::ioctl(p.sender.get(), SIOCOUTQ, &queued) != 0) return 5;
          if (queued == 0) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        const DisposalCounts c = disposal_counts();
        return c.handed == 0 && c.held == 0 && c.processes == 0 ? 0 : 2;
      },
      std::chrono::seconds(60)));
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  EXPECT_TRUE(finishes(
      [&] {
        std::vector<LingeringSocket> held;
        Pair p = pair_of(SOCK_SEQPACKET);
        if (!p.receiver.valid()) return 3;
        for (int i = 0; i < kPlain; ++i) {
          if (::send(p.sender.get(), "request", 7, 0) != 7) return 4;
        }
        if (!queue_lingering(p, &held)) return 4;
        close_client_socket(std::move(p.receiver), kUser);
        while (!handed(0, 1))
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return 0;
      },
      std::chrono::seconds(60)));
}

// The hole in the design before this one: disposal threads, sixteen at
// most, each held by a close that blocks. A user who passed more lingering
// sockets than that on as many connections left each one further open in
// the agent, and its descriptors ran out. Now every such socket leaves the
// agent at once, and another user's disposal is not held up behind them.
TEST(PassedDescriptors, OneUsersStuckClosesHoldNeitherTheAgentsDescriptorsNorAnothers) {
  constexpr int kConnections = 24;
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  // All in the child: the copies it closes are the only ones.
  EXPECT_TRUE(finishes(
      [&] {
        std::vector<LingeringSocket> held;
        std::vector<Pair> stuck;
        for (int i = 0; i < kConnections; ++i) {
          stuck.push_back(pair_of(SOCK_SEQPACKET));
          if (!stuck.back().receiver.valid() || !queue_lingering(stuck.back(), &held)) return 8;
        }
        const std::size_t before = open_descriptors();
        for (Pair& p : stuck)
          close_client_socket(std::move(p.receiver), kUser);
        // Each socket left, and the user's one disposal process holds them.
        if (!handed(0, kConnections)) return 2;
        if (open_descriptors() > before - kConnections + 2) return 3;
        // The other user passes a pipe's write end, whose close is observable.
        int pipe_ends[2];
        Pair other = pair_of(SOCK_SEQPACKET);
        if (!other.receiver.valid() || ::pipe2(pipe_ends, O_CLOEXEC) != 0) return 4;
        UniqueFd read_end(pipe_ends[0]);
        if (!send_descriptor(other.sender.get(), pipe_ends[1])) return 5;
        ::close(pipe_ends[1]);
        close_client_socket(std::move(other.receiver), kOtherUser);
        if (!handed(0, kConnections + 1)) return 6;
        return write_end_closed(read_end.get(), std::chrono::seconds(20)) ? 0 : 7;
      },
      std::chrono::seconds(60)));
}

// A message with the most descriptors one can carry: all of them are
// closed elsewhere, none here.
TEST(PassedDescriptors, AFullMessageIsClosedElsewhereWhole) {
  constexpr std::size_t kMaxFds = 253;  // SCM_MAX_FD
  // All in the child: the copy it closes is the agent's only one.
  EXPECT_TRUE(finishes(
      [&] {
        Pair p = pair_of(SOCK_SEQPACKET);
        int pipe_ends[2];
        if (!p.receiver.valid() || ::pipe2(pipe_ends, O_CLOEXEC) != 0) return 2;
        UniqueFd read_end(pipe_ends[0]);
        std::vector<int> fds(kMaxFds, pipe_ends[1]);
        char byte = 'x';
        iovec iov{&byte, 1};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
        if (::sendmsg(p.sender.get(), &msg, 0) != 1) return 3;
        ::close(pipe_ends[1]);
        close_client_socket(std::move(p.receiver), kUser);
        if (!handed(0, 1)) return 4;
        return write_end_closed(read_end.get(), std::chrono::seconds(20)) ? 0 : 5;
      },
      std::chrono::seconds(30)));
}

// A peer that closes with a reply it never read leaves ECONNRESET pending
// on the agent's end; the error comes before the queue and must not hide
// what is queued.
TEST(PassedDescriptors, APendingErrorDoesNotHideWhatIsQueued) {
  {
    // The setting: a peer that closes with a reply unread leaves ECONNRESET.
    Pair p = pair_of(SOCK_SEQPACKET);
    ASSERT_TRUE(p.receiver.valid());
    ASSERT_EQ(::send(p.receiver.get(), "reply", 5, 0), 5);
    p.sender.reset();
    int err = 0;
    socklen_t len = sizeof err;
    ASSERT_EQ(::getsockopt(p.receiver.get(), SOL_SOCKET, SO_ERROR, &err, &len), 0);
    ASSERT_EQ(err, ECONNRESET);
  }
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  EXPECT_TRUE(finishes(
      [&] {
        std::vector<LingeringSocket> held;
        Pair q = pair_of(SOCK_SEQPACKET);
        if (!q.receiver.valid() || ::send(q.receiver.get(), "reply", 5, 0) != 5 ||
            !queue_lingering(q, &held)) {
          return 3;  // the reply is never read by the peer
        }
        q.sender.reset();
        close_client_socket(std::move(q.receiver), kUser);
        return handed(0, 1) ? 0 : 2;
      },
      std::chrono::seconds(30)));
}

// Where the kernel has SO_PASSRIGHTS, a sender is refused outright.
TEST(PassedDescriptors, SendersAreRefusedWhereTheKernelCan) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd receiver(pair[0]);
  UniqueFd sender(pair[1]);
  if (!refuse_passed_descriptors(receiver.get())) GTEST_SKIP() << "no SO_PASSRIGHTS here";
  EXPECT_FALSE(send_descriptor(sender.get(), sender.get()));
  EXPECT_EQ(errno, EPERM);
}

}  // namespace
}  // namespace egpu::agent
