// Hostile tenants, finding 7: a process that outlives its step (a daemonised
// child) kept its attachment, and the shim gated on the GPU slot alone: once
// the agent gave the slot to the next tenant, the orphan launched during that
// tenant's slices. Now the shim checks that the slot is still its instance's
// and refuses the orphan's launches.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/protocol/messages.h"
#include "enforced_node.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;

TEST(Orphans, AProcessThatOutlivesItsStepDoesNotRideOnTheNextTenant) {
  EnforcedNode node("orphan");
  const uint64_t old_instance = node.create(1, 50);
  auto orphan = node.start(1, greedy("orphan"));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"orphan"}), 20s));
  // The step ends under its process (as SPANK does at step exit).
  auto removed = node.agent().call(protocol::RemoveRequest{1, 0, 0});
  ASSERT_TRUE(removed.ok());
  ASSERT_EQ(removed->status, protocol::ReplyStatus::kOk) << removed->text;
  // The next tenant gets the freed slot (the lowest free one).
  const uint64_t tenant_instance = node.create(2, 50);
  ASSERT_NE(tenant_instance, old_instance);
  auto tenant = node.start(2, greedy("tenant"));
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"tenant"}), 20s));
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3000ms);
  sampler.stop();
  const auto [split, used] = harness::split_of_used_time(
      harness::compute_shares(harness::samples_between(sampler.samples(), from, from + 3000ms), 0,
                              harness::GroupBy::kLabel, 500ms));
  std::printf("after the orphan's step ended:\n%s", harness::format_report(split).c_str());
  EXPECT_LE(split.share("orphan"), 0.01);
  // The orphan's launches are refused: the workload stops on the error.
  const auto st = orphan->wait_for(10s);
  ASSERT_TRUE(st.has_value()) << "the orphan still runs";
  EXPECT_FALSE(st->success()) << st->describe();
  stop(*tenant);
}

}  // namespace
}  // namespace egpu::integration
