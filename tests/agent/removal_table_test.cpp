// egpuctl remove without --json: the agent's reply as a table.
#include "nodeagent/egpuctl/removal_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/accounting/step_usage.h"

namespace egpu::ctl {
namespace {

TEST(RemovalTable, EachRemovedInstanceIsARowOfWhatItAchieved) {
  accounting::StepUsage u;
  u.gpu = 1;
  u.units = 30;
  u.totals.started_unix_ns = 1'000'000'000;
  u.ended_unix_ns = 11'000'000'000;  // 10 s
  u.totals.device_ns = 3'000'000'000;
  u.totals.throttled_ns = 2'500'000'000;
  u.totals.mem_peak_bytes = 512ull << 20;
  u.totals.agent_restarts = 1;
  u.step = "batch";
  const auto table = removal_table(accounting::removal_to_json(1, {u}));
  ASSERT_TRUE(table) << table.error();
  EXPECT_EQ(*table,
            "removed 1 instance\n"
            "STEP        GPU UNITS  ELAPSED_S   DEVICE_S  SHARE MEM_PEAK_MIB THROTTLED_S  NOTE\n"
            "batch         1    30       10.0        3.0  0.300          512         2.5  1 agent "
            "restart(s)\n");
}

TEST(RemovalTable, NothingRemovedIsOneLine) {
  const auto table = removal_table(accounting::removal_to_json(0, {}));
  ASSERT_TRUE(table) << table.error();
  EXPECT_EQ(*table, "removed 0 instances\n");
}

TEST(RemovalTable, AReplyThatIsNotARemovalIsAnError) {
  for (const char* reply : {"", "[]", "{\"usage\":[]}", "{\"removed\":-1,\"usage\":[]}",
                            "{\"removed\":1,\"usage\":[1]}"}) {
    EXPECT_FALSE(removal_table(reply)) << reply;
  }
}

}  // namespace
}  // namespace egpu::ctl
