// WakeChannel::drain: one call reads what is queued (at most a bounded
// number) and says when nothing was.
#include "nodeagent/wake_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdint>

namespace egpu::agent {
namespace {

void kick(const WakeChannel& c, size_t bytes = 1) {
  const uint64_t payload = 0;
  ASSERT_EQ(::send(c.shim_fd(), &payload, bytes, MSG_DONTWAIT | MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes));
}

TEST(WakeChannel, NothingQueuedIsNothing) {
  auto c = WakeChannel::create();
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

TEST(WakeChannel, OneDrainReadsEveryQueuedKick) {
  auto c = WakeChannel::create();
  ASSERT_TRUE(c.ok()) << c.error();
  for (int i = 0; i < 5; ++i)
    kick(*c);
  kick(*c, 0);  // an empty datagram is a kick too
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

TEST(WakeChannel, AFloodIsReadInBoundedTurns) {
  auto c = WakeChannel::create();
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
TEST(WakeChannel, AShutDownShimEndIsNothingToRead) {
  auto c = WakeChannel::create();
  ASSERT_TRUE(c.ok()) << c.error();
  kick(*c);
  ASSERT_EQ(::shutdown(c->shim_fd(), SHUT_RDWR), 0);
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kKicked);  // what it sent before
  EXPECT_EQ(c->drain(), WakeChannel::Drained::kNothing);
}

}  // namespace
}  // namespace egpu::agent
