// Descriptors a client passes: never closed, or dropped by the kernel, on
// the receiving thread (nodeagent/passed_descriptors.h). Each receiver runs
// in a child, so a receiver that blocks fails the test instead of hanging it.
#include "nodeagent/passed_descriptors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

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
    ASSERT_TRUE(f.receiver.valid());
    if (finishes([&] { return receive_without_room(f.receiver.get()); }, std::chrono::seconds(2))) {
      GTEST_SKIP() << "this kernel does not block on the dropped socket: nothing to show";
    }
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

// Closing a client's socket takes in its queue first: an empty message
// ahead of one carrying a lingering socket does not end the drain early.
TEST(PassedDescriptors, ClosingAClientSocketTakesInWhatIsQueued) {
  for (int type : {SOCK_SEQPACKET, SOCK_DGRAM}) {
    InFlight f;
    f.lingering = lingering_socket();
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, pair), 0);
    f.receiver.reset(pair[0]);
    f.sender.reset(pair[1]);
    ASSERT_EQ(::send(f.sender.get(), "", 0, 0), 0);
    ASSERT_TRUE(send_descriptor(f.sender.get(), f.lingering.socket.get()));
    f.lingering.socket.reset();
    EXPECT_TRUE(finishes(
        [&] {
          const std::size_t before = disposal_counts().disposed;
          close_client_socket(std::move(f.receiver));
          return disposal_counts().disposed == before + 1 ? 0 : 2;
        },
        std::chrono::seconds(30)))
        << (type == SOCK_DGRAM ? "datagram" : "seqpacket");
  }
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
