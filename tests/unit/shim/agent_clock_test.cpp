#include "shim/agent_clock.h"

#include <gtest/gtest.h>

namespace egpu::shim {
namespace {

TEST(AgentClock, ReadsTheMonotonicOffsetOfATimeNamespace) {
  EXPECT_EQ(parse_monotonic_offset("monotonic      100000         0\n"
                                   "boottime            0         0\n"),
            100'000'000'000'000);
  EXPECT_EQ(parse_monotonic_offset("boottime 7 0\nmonotonic -5 250\n"), -4'999'999'750);
  // Kernels that print clock ids: CLOCK_MONOTONIC is 1, CLOCK_BOOTTIME 7.
  EXPECT_EQ(parse_monotonic_offset("1 3 5\n7 9 9\n"), 3'000'000'005);
  EXPECT_EQ(parse_monotonic_offset("monotonic 0 0"), 0);  // no newline at the end
}

TEST(AgentClock, AMalformedOrMissingOffsetIsNone) {
  EXPECT_EQ(parse_monotonic_offset(""), std::nullopt);
  EXPECT_EQ(parse_monotonic_offset("boottime 1 0\n"), std::nullopt);
  EXPECT_EQ(parse_monotonic_offset("monotonic x 0\n"), std::nullopt);
  EXPECT_EQ(parse_monotonic_offset("monotonic 1\n"), std::nullopt);
  EXPECT_EQ(parse_monotonic_offset("monotonic 1 1000000000\n"), std::nullopt);
  EXPECT_EQ(parse_monotonic_offset("monotonic 99999999999999999 0\n"), std::nullopt);
  EXPECT_EQ(parse_monotonic_offset("monotonicx 1 0\n"), std::nullopt);
}

}  // namespace
}  // namespace egpu::shim
