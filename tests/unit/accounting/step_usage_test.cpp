#include "core/accounting/step_usage.h"

#include <gtest/gtest.h>

namespace egpu::accounting {
namespace {

TEST(UsageFold, AddsProgressAndGoesOnAfterARestart) {
  UsageTotals t;
  UsageFold first;
  first.observe(t, 100, 10, 5, 1000);
  first.observe(t, 250, 30, 2, 1000);
  EXPECT_EQ(t.device_ns, 250u);
  EXPECT_EQ(t.throttled_ns, 30u);
  EXPECT_EQ(t.mem_peak_bytes, 5u);
  // A new agent: its counters start at 0; the totals go on from 250.
  UsageFold second;
  second.observe(t, 40, 0, 7, 1000);
  second.observe(t, 90, 5, 0, 1000);
  EXPECT_EQ(t.device_ns, 340u);
  EXPECT_EQ(t.throttled_ns, 35u);
  EXPECT_EQ(t.mem_peak_bytes, 7u);
}

TEST(UsageFold, ACounterThatDipsAddsNothingTwiceAndMemoryIsCapped) {
  UsageTotals t;
  UsageFold f;
  f.observe(t, 500, 300, 0, 100);
  f.observe(t, 20, 290, 1u << 30, 100);  // a dip adds nothing...
  EXPECT_EQ(t.device_ns, 500u);
  EXPECT_EQ(t.throttled_ns, 300u);
  f.observe(t, 520, 310, 0, 100);  // ...and counts again from its old high
  EXPECT_EQ(t.device_ns, 520u);
  EXPECT_EQ(t.throttled_ns, 310u);
  EXPECT_EQ(t.mem_peak_bytes, 100u);  // what the job's page says, up to the GPU's size
  t.device_ns = UINT64_MAX - 5;
  f.observe(t, 1000, 0, 0, 100);
  EXPECT_EQ(t.device_ns, UINT64_MAX);  // saturates
}

TEST(StepUsage, ShareIsDeviceTimeOverElapsedTime) {
  StepUsage u;
  u.totals.started_unix_ns = 1'000'000'000;
  u.ended_unix_ns = 11'000'000'000;
  u.totals.device_ns = 3'000'000'000;
  EXPECT_DOUBLE_EQ(u.elapsed_s(), 10.0);
  EXPECT_DOUBLE_EQ(u.achieved_share(), 0.3);
  u.ended_unix_ns = 0;  // a clock stepped back: no time, no share
  EXPECT_DOUBLE_EQ(u.elapsed_s(), 0.0);
  EXPECT_DOUBLE_EQ(u.achieved_share(), 0.0);
}

TEST(RemovalJson, RoundTrips) {
  StepUsage a;
  a.gpu = 3;
  a.units = 30;
  a.totals = {5, 6, 7, 8, 2, 1};
  a.ended_unix_ns = 9;
  const std::string text = removal_to_json(2, {a});
  EXPECT_NE(text.find("\"removed\":2"), std::string::npos) << text;
  auto back = usage_from_json(text);
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->size(), 1u);
  const StepUsage& b = back->front();
  EXPECT_EQ(b.gpu, 3u);
  EXPECT_EQ(b.units, 30u);
  EXPECT_EQ(b.totals.started_unix_ns, 5);
  EXPECT_EQ(b.totals.device_ns, 6u);
  EXPECT_EQ(b.totals.throttled_ns, 7u);
  EXPECT_EQ(b.totals.mem_peak_bytes, 8u);
  EXPECT_EQ(b.totals.agent_restarts, 2u);
  EXPECT_EQ(b.totals.partial, 1u);
  EXPECT_EQ(b.ended_unix_ns, 9);
}

TEST(RemovalJson, TheUsageSoFarReadsBackTheSame) {
  StepUsage a;
  a.gpu = 1;
  a.units = 40;
  a.totals = {1, 2, 3, 4, 0, 0};
  a.ended_unix_ns = 5;
  const std::string text = usage_to_json({a, a});
  EXPECT_EQ(text.find("removed"), std::string::npos) << text;
  auto back = usage_from_json(text);
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ(back->back().units, 40u);
  EXPECT_EQ(back->back().totals.mem_peak_bytes, 4u);
  EXPECT_EQ(back->back().ended_unix_ns, 5);
}

TEST(RemovalJson, RefusesWhatIsNotAReport) {
  for (
      const char* bad :
      {"removed 1 instance(s)", "[]", "{\"removed\":1}", "{\"usage\":[1]}",
       "{\"usage\":[{\"gpu\":0}]}",
       R"({"usage":[{"gpu":-1,"units":1,"started_unix_ns":0,"ended_unix_ns":0,"device_ns":0,)"
       R"("throttled_ns":0,"mem_peak_bytes":0,"agent_restarts":0,"partial":false}]})",
       R"({"usage":[{"gpu":4294967296,"units":1,"started_unix_ns":0,"ended_unix_ns":0,)"
       R"("device_ns":0,"throttled_ns":0,"mem_peak_bytes":0,"agent_restarts":0,"partial":false}]})",
       R"({"usage":[{"gpu":0,"units":1,"started_unix_ns":0,"ended_unix_ns":0,"device_ns":0.5,)"
       R"("throttled_ns":0,"mem_peak_bytes":0,"agent_restarts":0,"partial":false}]})",
       R"({"usage":[{"gpu":0,"units":1,"started_unix_ns":0,"ended_unix_ns":0,"device_ns":0,)"
       R"("throttled_ns":0,"mem_peak_bytes":0,"agent_restarts":0,"partial":false,"step":"a\nb"}]})",
       // Past int64_t: it must not wrap into a negative start time.
       R"({"usage":[{"gpu":0,"units":1,"started_unix_ns":18446744073709551615,)"
       R"("ended_unix_ns":0,"device_ns":0,"throttled_ns":0,"mem_peak_bytes":0,)"
       R"("agent_restarts":0,"partial":false}]})"}) {
    EXPECT_FALSE(usage_from_json(bad)) << bad;
  }
  // A step label, where the agent said one, comes back.
  StepUsage u;
  u.step = "batch";
  auto labelled = usage_from_json(removal_to_json(1, {u}));
  ASSERT_TRUE(labelled) << labelled.error();
  EXPECT_EQ(labelled->front().step, "batch");
  auto none = usage_from_json(R"({"removed":0,"usage":[]})");
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace egpu::accounting
