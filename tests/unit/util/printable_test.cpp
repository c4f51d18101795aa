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
  EXPECT_EQ(printable("\xc2"), "?");  // a lead byte without its continuation
}

// A byte that is not part of valid UTF-8 is one an 8-bit terminal may take
// for a control (a lone 0x9b is CSI), and nlohmann's dump() throws on it: a
// relayed status with one made egpuctl report a resize it had applied as a
// failure. Overlong forms and surrogates are no characters either.
TEST(Printable, BytesThatAreNotUtf8BecomeVisible) {
  EXPECT_EQ(printable("a\x9b"
                      "31mb"),
            "a?31mb");
  EXPECT_EQ(printable("\xff\xfe"), "??");
  EXPECT_EQ(printable("\xc0\xaf"), "??");                        // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "???");                   // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "????");              // past U+10FFFF
  EXPECT_EQ(printable("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // U+1F600 stays
  nlohmann::json value = {{"step", std::string("7.0\x9b")}};
  make_printable(value);
  EXPECT_NO_THROW((void)value.dump());
  EXPECT_EQ(value["step"], "7.0?");
}

// A field of a relayed status is one value: its newline would print a row
// of the job owner's making under root's (a fake instance, a fake node).
TEST(Printable, AJsonStringIsOneLine) {
  nlohmann::json value = {{"objective", "p99:40ms\n== node n9 ==\tforged"}};
  make_printable(value);
  EXPECT_EQ(value["objective"], "p99:40ms?== node n9 ==?forged");
  EXPECT_EQ(printable("a\nb", Lines::kOne), "a?b");
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
