#include "core/accounting/step_record.h"

#include <gtest/gtest.h>

#include "core/protocol/messages.h"

namespace egpu::accounting {
namespace {

StepRecord sample() {
  StepRecord r;
  r.job_id = 42;
  r.step_id = 0;
  r.node = "n1";
  r.usage.gpu = 1;
  r.usage.units = 30;
  r.usage.totals.started_unix_ns = 1'000'000'000;
  r.usage.ended_unix_ns = 61'000'000'000;
  r.usage.totals.device_ns = 18'000'000'000;
  r.usage.totals.throttled_ns = 4'870'000'000;
  r.usage.totals.mem_peak_bytes = (1u << 30) + 1;  // rounds up to 1025 MiB
  return r;
}

TEST(StepRecord, FormatsOneLineAndParsesBack) {
  StepRecord r = sample();
  const std::string text = format_step_record(r);
  EXPECT_EQ(text,
            "egpu step=42.0 node=n1 gpu=1 units=30 elapsed_s=60.000 device_s=18.000 share=0.300 "
            "mem_peak_mib=1025 throttled_s=4.870");
  auto key = parse_step_record(text);
  ASSERT_TRUE(key) << key.error();
  EXPECT_EQ(key->step, "42.0");
  EXPECT_EQ(key->node, "n1");
  EXPECT_EQ(key->gpu, 1u);
  r.step_id = protocol::kStepBatch;
  r.usage.totals.agent_restarts = 2;
  r.usage.totals.partial = 1;
  const std::string batch = format_step_record(r);
  EXPECT_NE(batch.find("step=42.batch "), std::string::npos) << batch;
  EXPECT_TRUE(batch.ends_with(" agent_restarts=2 partial=1")) << batch;
  ASSERT_TRUE(parse_step_record(batch)) << parse_step_record(batch).error();
  EXPECT_EQ(parse_step_record(batch)->step, "42.batch");
  EXPECT_FALSE(is_running_record(batch));
  // A checkpoint of a running step says so last; its key is the final one's.
  r.running = true;
  const std::string checkpoint = format_step_record(r);
  EXPECT_TRUE(checkpoint.ends_with(" partial=1 running=1")) << checkpoint;
  EXPECT_TRUE(is_running_record(checkpoint));
  ASSERT_TRUE(parse_step_record(checkpoint)) << parse_step_record(checkpoint).error();
  EXPECT_EQ(*parse_step_record(checkpoint), *parse_step_record(batch));
  EXPECT_FALSE(is_running_record("running=1"));
  EXPECT_FALSE(is_running_record(checkpoint + " "));
}

TEST(StepRecord, RefusesAnythingElse) {
  const std::string good = format_step_record(sample());
  const std::string rest = good.substr(good.find(" gpu="));  // " gpu=1 units=30 ..."
  for (const std::string& bad : {
           std::string("egpu"), std::string("egpu "), std::string("site note"),
           std::string("egpu step=42.0 node=n1 gpu=1"),  // fields missing
           good + " ",                                   // trailing space
           good + " extra=1",                            // unknown key
           good + " partial=2",                          // partial is 1 or absent
           good + " partial=1 agent_restarts=1",         // out of order
           good + " running=0",                          // running is 1 or absent
           good + " running=1 partial=1",                // out of order
           "egpu node=n1 step=42.0" + rest,              // out of order
           "egpu step=42 node=n1" + rest,                // no step part
           "egpu step=42.x node=n1" + rest,              // bad step name
           "egpu step=42.0 node=n;1" + rest,             // bad node name
           "egpu step=42.0 node=n1 gpu=-1" + good.substr(good.find(" units=")),  // bad number
           "egpu step=42.0  node=n1" + rest,                                     // double space
           good.substr(0, good.size() - 5) + "1e9",  // not a plain decimal
           good + std::string(600, 'x'),             // too long
       }) {
    EXPECT_FALSE(parse_step_record(bad)) << bad;
  }
}

TEST(StepRecord, NodeNames) {
  EXPECT_TRUE(valid_node_name("gpu-node01.cluster_a"));
  EXPECT_FALSE(valid_node_name(""));
  EXPECT_FALSE(valid_node_name("a b"));
  EXPECT_FALSE(valid_node_name("a;b"));
  EXPECT_FALSE(valid_node_name(std::string(65, 'a')));
}

}  // namespace
}  // namespace egpu::accounting
