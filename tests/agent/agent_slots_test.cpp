// Instance slots against the units Slurm places by: every step but extern
// is an instance, and a job's batch step is one beside its steps, so 100
// one-unit jobs with a step each are 200 instances on a GPU. With 64 slots
// (the old default) 32 of them filled the GPU for every later job while
// Slurm saw 68 units free and went on placing steps there.
#include <gtest/gtest.h>

#include <string>

#include "core/protocol/messages.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;

TEST(AgentSlots, UnitsRunOutBeforeInstanceSlots) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  for (uint64_t job = 1; job <= 100; ++job) {
    const uid_t owner = static_cast<uid_t>(5000 + job);
    protocol::CreateRequest batch = create_request(job, 1, owner);
    batch.step_id = protocol::kStepBatch;
    batch.flags = protocol::kCreateUmbrella;
    auto b = agent.call(batch);
    ASSERT_TRUE(b) << b.error();
    ASSERT_EQ(b->status, ReplyStatus::kOk) << "job " << job << ": " << b->text;
    auto s = agent.call(create_request(job, 1, owner));
    ASSERT_TRUE(s) << s.error();
    ASSERT_EQ(s->status, ReplyStatus::kOk) << "job " << job << " step 0: " << s->text;
  }
  // The GPU's units are all placed: the next job is refused for them.
  auto next = agent.call(create_request(101, 1, 5101));
  ASSERT_TRUE(next) << next.error();
  EXPECT_EQ(next->status, ReplyStatus::kOverAllocation) << next->text;
}

}  // namespace
}  // namespace egpu::test
