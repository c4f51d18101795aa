#include "core/util/mode.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

// The numbers are on the wire and in GPU pages that outlive an agent: an
// agent or shim of another build must read them the same.
static_assert(mode_value(Mode::kBurst) == 0);
static_assert(mode_value(Mode::kCap) == 1);

TEST(Mode, NamesAndNumbersRoundTrip) {
  for (Mode mode : {Mode::kBurst, Mode::kCap}) {
    EXPECT_EQ(parse_mode(to_string(mode)).value(), mode);
    EXPECT_EQ(mode_from_value(mode_value(mode)), mode);
  }
  EXPECT_STREQ(to_string(Mode::kBurst), "burst");
  EXPECT_STREQ(to_string(Mode::kCap), "cap");
}

TEST(Mode, ParseIgnoresCaseAndNamesWhatItAccepts) {
  EXPECT_EQ(parse_mode("CaP").value(), Mode::kCap);
  EXPECT_EQ(parse_mode("BURST").value(), Mode::kBurst);
  for (const char* bad : {"", "fast", "cap ", "0"}) {
    auto parsed = parse_mode(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error(), std::string("must be burst or cap, got '") + bad + "'");
  }
}

TEST(Mode, UnknownNumbersAreNotModes) {
  for (uint32_t value : {2u, 0xfffffffeu, 0xffffffffu})
    EXPECT_FALSE(mode_from_value(value).has_value()) << value;
}

}  // namespace
}  // namespace egpu
