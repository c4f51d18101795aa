// WakeChannel::drain: one call reads what is queued (at most a bounded
// number) and says when nothing was.
#include "nodeagent/wake_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "nodeagent/passed_descriptors.h"
#include "tests/agent/lingering_socket.h"

namespace egpu::agent {
namespace {

void kick(const WakeChannel& c, size_t bytes = 1) {
  const uint64_t payload = 0;
  ASSERT_EQ(::send(c.shim_fd(), &payload, bytes, MSG_DONTWAIT | MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes));
}

// Both ways of keeping descriptors out: the kernel's (SO_PASSRIGHTS, where
// it has it) and a peek at each datagram.
class WakeChannelTest : public ::testing::TestWithParam<WakeChannel::Descriptors> {};

TEST_P(WakeChannelTest, NothingQueuedIsNothing) {
  auto c = WakeChannel::create(::getuid(), GetParam());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

TEST_P(WakeChannelTest, OneDrainReadsEveryQueuedKick) {
  auto c = WakeChannel::create(::getuid(), GetParam());
  ASSERT_TRUE(c.ok()) << c.error();
  for (int i = 0; i < 5; ++i)
    kick(*c);
  kick(*c, 0);  // an empty datagram is a kick too
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

TEST_P(WakeChannelTest, AFloodIsReadInBoundedTurns) {
  auto c = WakeChannel::create(::getuid(), GetParam());
  ASSERT_TRUE(c.ok()) << c.error();
  const int queued = WakeChannel::kMaxDatagramsPerDrain + 10;
  int sent = 0;
  for (; sent < queued; ++sent) {
    const uint64_t payload = 0;
    if (::send(c->shim_fd(), &payload, sizeof payload, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) break;
  }
  ASSERT_GT(sent, WakeChannel::kMaxDatagramsPerDrain) << "the socket queue is too small";
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);  // the first turn's share
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);  // what was left
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

// A user who shuts its end down (hostile-tenant does) sends nothing more:
// the agent's end has nothing to read, and says so without blocking.
TEST_P(WakeChannelTest, AShutDownShimEndIsNothingToRead) {
  auto c = WakeChannel::create(::getuid(), GetParam());
  ASSERT_TRUE(c.ok()) << c.error();
  kick(*c);
  ASSERT_EQ(::shutdown(c->shim_fd(), SHUT_RDWR), 0);
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);  // what it sent before
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

INSTANTIATE_TEST_SUITE_P(Descriptors, WakeChannelTest,
                         ::testing::Values(WakeChannel::Descriptors::kRefusedWhereTheKernelCan,
                                           WakeChannel::Descriptors::kPeeked),
                         [](const auto& param_info) {
                           return param_info.param == WakeChannel::Descriptors::kPeeked ? "Peeked"
                                                                                        : "Refused";
                         });

// A channel a user sends a descriptor on (a kernel without SO_PASSRIGHTS):
// it is read no more, the descriptor is never taken in by the agent, and the
// channel's end is closed in a disposal process.
TEST(WakeChannel, ADescriptorSentOnTheChannelIsNeverTakenIn) {
  int ends[2];
  ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
  UniqueFd read_end(ends[0]);
  const std::size_t handed = disposal_counts().handed;
  {
    auto c = WakeChannel::create(::getuid(), WakeChannel::Descriptors::kPeeked);
    ASSERT_TRUE(c.ok()) << c.error();
    kick(*c);
    ASSERT_TRUE(test::send_descriptor(c->shim_fd(), ends[1]));
    ::close(ends[1]);
    EXPECT_EQ(c->drain(), WakeChannel::Drained::kClosed);
    EXPECT_EQ(c->drain(), WakeChannel::Drained::kClosed);  // still queued, still not taken in
    pollfd p{read_end.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << "the write end was closed: the agent took it in";
  }
  EXPECT_EQ(disposal_counts().handed, handed + 1);
  pollfd p{read_end.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 20'000), 1) << "the write end was never closed";
  char byte;
  EXPECT_EQ(::read(read_end.get(), &byte, 1), 0);
}

// An honest channel's ends are closed here: no process is started for them.
TEST(WakeChannel, AnHonestChannelIsClosedWithoutHandingOn) {
  const std::size_t handed = disposal_counts().handed;
  {
    auto c = WakeChannel::create(::getuid(), WakeChannel::Descriptors::kPeeked);
    ASSERT_TRUE(c.ok()) << c.error();
    kick(*c);
    EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);
  }
  EXPECT_EQ(disposal_counts().handed, handed);
}

// An abstract name of this test's (`tag` tells them apart).
std::pair<sockaddr_un, socklen_t> abstract_name(const std::string& tag) {
  sockaddr_un name{};
  name.sun_family = AF_UNIX;
  const std::string abstract = "egpu-test-" + tag + "-" + std::to_string(::getpid());
  std::memcpy(name.sun_path + 1, abstract.data(), abstract.size());
  return {name, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract.size())};
}

// The user's end of the channel, disconnected from the agent's and named
// (and then, in the second case, connected to a socket of the user's),
// takes a descriptor from a third socket, with a peek offset set so a peek
// would skip it. The agent never looks into that end: it hands it on.
TEST(WakeChannel, TheUsersEndIsHandedOnOnceItIsNoLongerTheAgentsPeer) {
  for (const bool reconnected : {false, true}) {
    SCOPED_TRACE(reconnected ? "connected to the user's socket" : "disconnected");
    int ends[2];
    ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
    UniqueFd read_end(ends[0]);
    const std::size_t handed = disposal_counts().handed;
    {
      auto c = WakeChannel::create(::getuid(), WakeChannel::Descriptors::kPeeked);
      ASSERT_TRUE(c.ok()) << c.error();
      sockaddr unspec{};
      unspec.sa_family = AF_UNSPEC;
      ASSERT_EQ(::connect(c->shim_fd(), &unspec, sizeof unspec), 0) << std::strerror(errno);
      const auto [shim_name, shim_len] = abstract_name("shim");
      ASSERT_EQ(::bind(c->shim_fd(), reinterpret_cast<const sockaddr*>(&shim_name), shim_len), 0)
          << std::strerror(errno);
      UniqueFd third(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      const auto [third_name, third_len] = abstract_name("third");
      ASSERT_EQ(::bind(third.get(), reinterpret_cast<const sockaddr*>(&third_name), third_len), 0);
      ASSERT_EQ(::connect(third.get(), reinterpret_cast<const sockaddr*>(&shim_name), shim_len), 0);
      ASSERT_TRUE(test::send_descriptor(third.get(), ends[1]));
      ASSERT_EQ(::send(third.get(), "p", 1, 0), 1);
      ::close(ends[1]);
      if (reconnected) {
        ASSERT_EQ(
            ::connect(c->shim_fd(), reinterpret_cast<const sockaddr*>(&third_name), third_len), 0)
            << std::strerror(errno);
      }
      const int skip = 1;
      (void)::setsockopt(c->shim_fd(), SOL_SOCKET, SO_PEEK_OFF, &skip, sizeof skip);
    }
    EXPECT_EQ(disposal_counts().handed, handed + 1);
    pollfd p{read_end.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 20'000), 1) << "the write end was never closed";
    char byte;
    EXPECT_EQ(::read(read_end.get(), &byte, 1), 0);
  }
}

}  // namespace
}  // namespace egpu::agent
