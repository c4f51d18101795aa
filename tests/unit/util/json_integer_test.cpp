// json_integer: only integers of the right range, whatever nlohmann stored.
#include "core/util/json_integer.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

using nlohmann::json;

TEST(JsonInteger, TakesIntegersInRange) {
  EXPECT_EQ(json_integer<uint32_t>(json(7)), 7u);
  EXPECT_EQ(json_integer<uint32_t>(json::parse("4294967295")), 4294967295u);
  EXPECT_EQ(json_integer<int64_t>(json::parse("-9223372036854775808")),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(json_integer<uint64_t>(json::parse("18446744073709551615")),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(json_integer<int32_t>(json(-5)), -5);
}

TEST(JsonInteger, RefusesWhatIsOutOfRangeOrNotAnInteger) {
  EXPECT_FALSE(json_integer<uint32_t>(json::parse("4294967296")));
  EXPECT_FALSE(json_integer<uint32_t>(json(-1)));
  EXPECT_FALSE(json_integer<uint64_t>(json(-1)));
  EXPECT_FALSE(json_integer<int32_t>(json::parse("2147483648")));
  EXPECT_FALSE(json_integer<int32_t>(json::parse("-2147483649")));
  // Stored unsigned by nlohmann: would wrap to -1 through get<int64_t>().
  EXPECT_FALSE(json_integer<int64_t>(json::parse("18446744073709551615")));
  EXPECT_FALSE(json_integer<int64_t>(json(1.5)));
  EXPECT_FALSE(json_integer<int64_t>(json(2.0)));
  EXPECT_FALSE(json_integer<int64_t>(json("5")));
  EXPECT_FALSE(json_integer<int64_t>(json(true)));
  EXPECT_FALSE(json_integer<int64_t>(json(nullptr)));
}

}  // namespace
}  // namespace egpu
