#include <gtest/gtest.h>

#include "nodeagent/egpuctl/agent_query.h"

namespace egpu::ctl {
namespace {

TEST(Selector, IdJobStepAndGpu) {
  auto id = parse_selector("12");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->id, 12u);
  auto step = parse_selector("12.0");
  ASSERT_TRUE(step.ok()) << step.error();
  EXPECT_EQ(step->id, 0u) << "JOB.STEP must not be read as an instance id";
  EXPECT_EQ(step->job, 12u);
  EXPECT_EQ(step->step, "0");
  EXPECT_EQ(step->gpu, -1);
  auto batch = parse_selector("7.batch@3");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->job, 7u);
  EXPECT_EQ(batch->step, "batch");
  EXPECT_EQ(batch->gpu, 3);
}

TEST(Selector, RejectsGarbage) {
  for (const char* bad : {"", "0", "x", "12.", "12.x", ".0", "1.0@", "1.0@99", "1.0@x"}) {
    EXPECT_FALSE(parse_selector(bad).ok()) << bad;
  }
}

TEST(Selector, ResolvesAgainstStatus) {
  auto status = nlohmann::json::parse(R"({"gpus":[{"instances":[
      {"id":3,"job":12,"step":"0","gpu":0},{"id":12,"job":5,"step":"0","gpu":0},
      {"id":4,"job":12,"step":"0","gpu":1}]}]})");
  auto both = resolve(status, *parse_selector("12.0"));
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->size(), 2u);
  auto one = resolve(status, *parse_selector("12.0@1"));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0]["id"], 4);
  auto by_id = resolve(status, *parse_selector("12"));
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ((*by_id)[0]["job"], 5);
  EXPECT_FALSE(resolve(status, *parse_selector("99.0")).ok());
}

}  // namespace
}  // namespace egpu::ctl
