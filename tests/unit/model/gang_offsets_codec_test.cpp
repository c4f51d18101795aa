// The multi-node gangs' offsets file's format (core/model/gang_offsets_codec).
#include "core/model/gang_offsets_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace egpu::model {
namespace {

TEST(GangOffsetsCodec, WhatIsEncodedDecodesToTheSame) {
  GangOffsets offsets;
  offsets.period = 20'000'000;
  offsets.offsets[{7, 0}] = 6'000'000;
  offsets.offsets[{8, 4'294'967'294u}] = 0;
  const auto back = decode_gang_offsets(encode_gang_offsets(offsets));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, offsets);
}

// Each way a file can be wrong is refused, naming the field.
TEST(GangOffsetsCodec, EveryFieldIsChecked) {
  const auto error_of = [](const std::string& text) {
    const auto decoded = decode_gang_offsets(text);
    return decoded ? std::string("decoded") : decoded.error();
  };
  const std::string head = R"({"version":1,"period_ns":20000000,"gangs":)";
  EXPECT_EQ(error_of("not json"), "not a JSON object");
  EXPECT_EQ(error_of(R"({"version":2,"period_ns":20000000,"gangs":[]})"),
            "not version 1 of the format");
  EXPECT_EQ(error_of(R"({"version":1,"period_ns":0,"gangs":[]})"),
            "period_ns: missing or not a positive integer");
  EXPECT_EQ(error_of(R"({"version":1,"period_ns":20000000})"), "gangs: missing or not an array");
  EXPECT_EQ(error_of(head + R"([{"job":0,"step":0,"offset_ns":0}]})"),
            "gangs[0]: job: missing or not a job id");
  EXPECT_EQ(error_of(head + R"([{"job":7,"step":-1,"offset_ns":0}]})"),
            "gangs[0]: step: missing or not a step id");
  EXPECT_EQ(error_of(head + R"([{"job":7,"step":0,"offset_ns":20000000}]})"),
            "gangs[0]: offset_ns: missing or not in [0, period_ns)");
  EXPECT_EQ(error_of(head + R"([{"job":7,"step":0,"offset_ns":1.5}]})"),
            "gangs[0]: offset_ns: missing or not in [0, period_ns)");
  EXPECT_EQ(
      error_of(head + R"([{"job":7,"step":0,"offset_ns":0},{"job":7,"step":0,"offset_ns":5}]})"),
      "gangs[1]: job 7 step 0 a second time");
  std::string many = head + "[";
  for (std::size_t i = 0; i <= GangOffsets::kMaxGangs; ++i)
    many += (i ? "," : "") + std::string(R"({"job":)") + std::to_string(i + 1) +
            R"(,"step":0,"offset_ns":0})";
  EXPECT_EQ(error_of(many + "]}"), "gangs: more than 4096");
  EXPECT_EQ(error_of(head + "[]}"), "decoded");
}

}  // namespace
}  // namespace egpu::model
