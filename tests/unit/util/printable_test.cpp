// What egpuctl prints of a job owner's process on root's terminal.
#include "core/util/printable.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace egpu {
namespace {

TEST(Printable, ControlCharactersBecomeVisibleAndTextStays) {
  // A cursor move, a window title, a terminal's answer-back request, CR,
  // backspace, DEL and an 8-bit CSI (U+009B) as UTF-8 encodes it.
  const std::string hostile =
      "ok\x1b[2J\x1b]0;root\x07 \x1b[c\rover\bwrite\x7f \xc2\x9b"
      "31m";
  EXPECT_EQ(printable(hostile), "ok?[2J?]0;root? ?[c?over?write? ?31m");
  EXPECT_EQ(printable("egpuctl: no such step 7.1\n\tnext line"),
            "egpuctl: no such step 7.1\n\tnext line");
  // Other UTF-8 is kept byte for byte (U+00E9, U+00A0, U+4E2D).
  EXPECT_EQ(printable("caf\xc3\xa9 \xc2\xa0 \xe4\xb8\xad"), "caf\xc3\xa9 \xc2\xa0 \xe4\xb8\xad");
  EXPECT_EQ(printable("\xc2"), "\xc2");  // a lone lead byte at the end is no C1
}

TEST(Printable, EveryStringOfAJsonValueKeysIncluded) {
  auto value =
      nlohmann::json::parse(R"({"gpus":[{"instances":[{"step":"7.0\u001b[2J","mode":"burst"}]}],)"
                            R"("k\u0007":["a\u009bb",3,true,null]})");
  make_printable(value);
  EXPECT_EQ(value["gpus"][0]["instances"][0]["step"], "7.0?[2J");
  EXPECT_EQ(value["gpus"][0]["instances"][0]["mode"], "burst");
  ASSERT_TRUE(value.contains("k?")) << value.dump();
  EXPECT_EQ(value["k?"][0], "a?b");
  EXPECT_EQ(value["k?"][1], 3);
  EXPECT_EQ(value["k?"][2], true);
  EXPECT_TRUE(value["k?"][3].is_null());
}

}  // namespace
}  // namespace egpu
