#include "core/util/mode.h"

#include <gtest/gtest.h>

namespace egpu {
namespace {

// The numbers are on the wire and in GPU pages that outlive an agent: an
// agent or shim of another build must read them the same.
static_assert(mode_value(Mode::kBurst) == 0);
static_assert(mode_value(Mode::kCap) == 1);
static_assert(mode_value(Mode::kLend) == 2);
// FAA slices a lend instance's time as burst: lending moves share, nothing else.
static_assert(time_slicing(Mode::kLend) == Mode::kBurst);
static_assert(time_slicing(Mode::kCap) == Mode::kCap);
static_assert(time_slicing(Mode::kBurst) == Mode::kBurst);

TEST(Mode, NamesAndNumbersRoundTrip) {
  for (Mode mode : {Mode::kBurst, Mode::kCap, Mode::kLend}) {
    EXPECT_EQ(parse_mode(to_string(mode)).value(), mode);
    EXPECT_EQ(mode_from_value(mode_value(mode)), mode);
  }
  EXPECT_STREQ(to_string(Mode::kBurst), "burst");
  EXPECT_STREQ(to_string(Mode::kCap), "cap");
  EXPECT_STREQ(to_string(Mode::kLend), "lend");
}

TEST(Mode, ParseIgnoresCaseAndNamesWhatItAccepts) {
  EXPECT_EQ(parse_mode("CaP").value(), Mode::kCap);
  EXPECT_EQ(parse_mode("BURST").value(), Mode::kBurst);
  for (const char* bad : {"", "fast", "cap ", "0"}) {
    auto parsed = parse_mode(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error(), std::string("must be burst, cap or lend, got '") + bad + "'");
  }
}

TEST(Mode, UnknownNumbersAreNotModes) {
  for (uint32_t value : {3u, 0xfffffffeu, 0xffffffffu})
    EXPECT_FALSE(mode_from_value(value).has_value()) << value;
}

}  // namespace
}  // namespace egpu
