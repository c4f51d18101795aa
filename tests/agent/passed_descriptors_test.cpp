// Descriptors a client passes: never closed, or dropped by the kernel, on
// the receiving thread (nodeagent/passed_descriptors.h). Each receiver runs
// in a child, so a receiver that blocks fails the test instead of hanging it.
#include "nodeagent/passed_descriptors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
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

using test::lingering_socket;
using test::LingeringSocket;
using test::send_descriptor;

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

// A SEQPACKET pair with a lingering socket in flight from `sender` to
// `receiver`, the sender's own copy closed: the receiver holds the last
// reference.
struct InFlight {
  LingeringSocket lingering;
  UniqueFd receiver;
  UniqueFd sender;
};
InFlight in_flight(int type = SOCK_SEQPACKET) {
  InFlight f;
  f.lingering = lingering_socket();
  int pair[2];
  if (!f.lingering.socket.valid() || ::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, pair) != 0)
    return {};
  f.receiver.reset(pair[0]);
  f.sender.reset(pair[1]);
  if (!send_descriptor(f.sender.get(), f.lingering.socket.get())) return {};
  f.lingering.socket.reset();
  return f;
}

int receive_without_room(int fd) {
  char buf[16];
  return ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) == 1 ? 0 : 1;
}

TEST(PassedDescriptors, AReceiverWithRoomDisposesOfALingeringSocketWithoutBlocking) {
  {
    // The hazard: a receiver without room for it blocks in the kernel's drop.
    InFlight f = in_flight();
    if (!f.receiver.valid()) GTEST_SKIP() << "no loopback TCP here";
    // Shown, not required: the receiver with room below is checked either way.
    const bool blocked =
        !finishes([&] { return receive_without_room(f.receiver.get()); }, std::chrono::seconds(2));
    ::testing::Test::RecordProperty("receiver_without_room_blocked", blocked ? "yes" : "no");
  }
  InFlight f = in_flight();
  ASSERT_TRUE(f.receiver.valid());
  EXPECT_TRUE(finishes(
      [&] {
        char buf[16];
        iovec iov{buf, sizeof buf};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        PassedControl control;
        expect_passed(msg, control);
        if (::recvmsg(f.receiver.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1) return 2;
        return dispose_passed(msg) == 1 ? 0 : 3;
      },
      std::chrono::seconds(30)));
}

// Waits (in a child) until the workers have disposed of `count` more
// descriptors than `before` and nothing is pending.
bool disposed(std::size_t before, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const DisposalCounts now = disposal_counts();
    if (now.disposed == before + count && now.pending == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A pair of `type` with messages queued from `sender` to `receiver`.
struct Pair {
  UniqueFd receiver;
  UniqueFd sender;
};
Pair pair_of(int type) {
  int ends[2];
  if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, ends) != 0) return {};
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

// Closing a client's socket takes in its queue first: an empty message
// ahead of one carrying a lingering socket does not end the drain early.
TEST(PassedDescriptors, ClosingAClientSocketTakesInWhatIsQueued) {
  for (int type : {SOCK_SEQPACKET, SOCK_DGRAM}) {
    LingeringSocket lingering = lingering_socket();
    if (!lingering.socket.valid()) GTEST_SKIP() << "no loopback TCP here";
    Pair p = pair_of(type);
    ASSERT_TRUE(p.receiver.valid());
    ASSERT_EQ(::send(p.sender.get(), "", 0, 0), 0);
    ASSERT_TRUE(send_descriptor(p.sender.get(), lingering.socket.get()));
    lingering.socket.reset();
    EXPECT_TRUE(finishes(
        [&] {
          if (!start_disposal()) return 3;
          const std::size_t before = disposal_counts().disposed;
          close_client_socket(std::move(p.receiver));
          return disposed(before, 1) ? 0 : 2;
        },
        std::chrono::seconds(30)))
        << (type == SOCK_DGRAM ? "datagram" : "seqpacket");
    (void)p.receiver.release();  // as below: never closed here
  }
}

// A message with the most descriptors one can carry, queued at close: the
// drain has room for all of them beside its credentials, so the kernel
// drops none (a drop is a close in the receiver).
TEST(PassedDescriptors, AFullMessageIsTakenInWhole) {
  Pair p = pair_of(SOCK_SEQPACKET);
  ASSERT_TRUE(p.receiver.valid());
  std::vector<int> fds;
  for (std::size_t i = 0; i < PassedControl::kMaxFds; ++i)
    fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  char byte = 'x';
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  PassedControl control;
  msg.msg_control = control.bytes;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  ASSERT_EQ(::sendmsg(p.sender.get(), &msg, 0), 1) << std::strerror(errno);
  for (int fd : fds)
    ::close(fd);
  EXPECT_TRUE(finishes(
      [&] {
        if (!start_disposal()) return 3;
        const std::size_t before = disposal_counts().disposed;
        close_client_socket(std::move(p.receiver));
        return disposed(before, PassedControl::kMaxFds) ? 0 : 2;
      },
      std::chrono::seconds(30)));
}

// A peer that closes with a reply it never read leaves ECONNRESET pending
// on the agent's end; the error comes before the queue and must not end
// the drain.
TEST(PassedDescriptors, APendingErrorDoesNotEndTheDrain) {
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
  LingeringSocket again = lingering_socket();
  if (!again.socket.valid()) GTEST_SKIP() << "no loopback TCP here";
  Pair q = pair_of(SOCK_SEQPACKET);
  ASSERT_EQ(::send(q.receiver.get(), "reply", 5, 0), 5);  // never read by the peer
  ASSERT_TRUE(send_descriptor(q.sender.get(), again.socket.get()));
  again.socket.reset();
  q.sender.reset();
  EXPECT_TRUE(finishes(
      [&] {
        if (!start_disposal()) return 3;
        const std::size_t before = disposal_counts().disposed;
        close_client_socket(std::move(q.receiver));
        return disposed(before, 1) ? 0 : 2;
      },
      std::chrono::seconds(30)));
  // This process's copy is never closed: had the drain left the message, its
  // close would block here.
  (void)q.receiver.release();
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
