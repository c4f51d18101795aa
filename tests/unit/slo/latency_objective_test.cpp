#include "core/slo/latency_objective.h"

#include <gtest/gtest.h>

namespace egpu::slo {
namespace {

LatencyObjective parsed(std::string_view text) {
  auto r = parse_objective(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.error();
  if (!r.ok() || !r->has_value()) return {};
  return **r;
}

std::string refused(std::string_view text) {
  auto r = parse_objective(text);
  EXPECT_FALSE(r.ok()) << text << " was accepted";
  return r.ok() ? std::string{} : r.error();
}

TEST(LatencyObjective, ReadsPercentileAndTargetInEachUnit) {
  EXPECT_EQ(parsed("p99:40ms"), (LatencyObjective{99'000, 40'000'000}));
  EXPECT_EQ(parsed("P99.9:1.5s"), (LatencyObjective{99'900, 1'500'000'000}));
  EXPECT_EQ(parsed("p50:2500us"), (LatencyObjective{50'000, 2'500'000}));
  EXPECT_EQ(parsed("p99.999:1ms"), (LatencyObjective{99'999, 1'000'000}));
  EXPECT_DOUBLE_EQ(parsed("p95:1s").quantile(), 0.95);
}

TEST(LatencyObjective, OffIsNoObjective) {
  auto r = parse_objective("OFF");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(to_string(std::nullopt), "off");
}

TEST(LatencyObjective, RefusesWhatCannotBeHeldNamingThePart) {
  EXPECT_NE(refused("p101:5ms").find("'p101' is out of range"), std::string::npos);
  EXPECT_NE(refused("p100:5ms").find("below p100"), std::string::npos);
  EXPECT_NE(refused("p0:5ms").find("above p0"), std::string::npos);
  EXPECT_NE(refused("p99:0ms").find("below 1ms"), std::string::npos);
  EXPECT_NE(refused("p99:500us").find("below 1ms"), std::string::npos);
  EXPECT_NE(refused("p99:601s").find("above 600s"), std::string::npos);
  EXPECT_NE(refused("p99:99999999999999999999s").find("above 600s"), std::string::npos);
  EXPECT_NE(refused("p99:40").find("with a unit"), std::string::npos);
  EXPECT_NE(refused("p99:-4ms").find("with a unit"), std::string::npos);
  EXPECT_NE(refused("p9x:4ms").find("'p9x' is not a number"), std::string::npos);
  EXPECT_NE(refused("p99.1234:4ms").find("not a number"), std::string::npos);
  EXPECT_NE(refused("99:40ms").find("is not an objective"), std::string::npos);
  EXPECT_NE(refused("").find("is not an objective"), std::string::npos);
  EXPECT_NE(refused("p99").find("is not an objective"), std::string::npos);
  EXPECT_NE(refused("p99:.5s").find("with a unit"), std::string::npos);
  EXPECT_NE(refused("p99:5.ms").find("with a unit"), std::string::npos);
}

TEST(LatencyObjective, PrintsWhatItReadsBack) {
  for (const char* text : {"p99:40ms", "p99.9:1500ms", "p50:2.5ms", "p99.999:1ms", "p90:1.001ms"}) {
    const auto o = parse_objective(text);
    ASSERT_TRUE(o.ok()) << o.error();
    EXPECT_EQ(to_string(*o), text);
    const auto again = parse_objective(to_string(*o));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *o);
  }
}

}  // namespace
}  // namespace egpu::slo
