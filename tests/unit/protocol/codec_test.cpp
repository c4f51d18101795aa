#include "core/protocol/codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

namespace egpu::protocol {
namespace {

CreateRequest valid_create() {
  CreateRequest c{};
  c.job_id = 42;
  c.step_id = 0;
  c.gpu_index = 1;
  c.uid = 1000;
  c.gid = 1000;
  c.units = 30;
  c.job_units = 60;
  c.mem_quota = 24ull << 30;
  c.mode = mode_value(Mode::kCap);
  c.flags = kCreateUmbrella;
  return c;
}

TEST(Codec, RoundTripsEveryRequestType) {
  std::vector<Request> requests = {AttachRequest{7, 3, 2},
                                   Request{valid_create()},
                                   RemoveRequest{7, kAllSteps, 0},
                                   ResizeRequest{99, 70, kModeUnchanged, 0, 0},
                                   StatusRequest{0, 0},
                                   ShowRequest{5},
                                   ObjectiveRequest{5, 99'000, 0, 40'000'000},
                                   ObjectiveRequest{5, 0, 0, 0},
                                   UsageRequest{7, 0, 0},
                                   UsageRequest{7, kStepBatch, 0}};
  uint32_t id = 1;
  for (const auto& req : requests) {
    auto bytes = encode_request(req, id);
    auto decoded = decode_request(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(decoded->request_id, id);
    EXPECT_EQ(decoded->request.index(), req.index());
    ++id;
  }
  auto bytes = encode_request(Request{valid_create()}, 9);
  auto decoded = decode_request(bytes);
  ASSERT_TRUE(decoded.ok());
  const auto& c = std::get<CreateRequest>(decoded->request);
  EXPECT_EQ(c.job_id, 42u);
  EXPECT_EQ(c.units, 30u);
  EXPECT_EQ(c.job_units, 60u);
  EXPECT_EQ(c.mem_quota, 24ull << 30);
  EXPECT_EQ(c.flags, kCreateUmbrella);
}

TEST(Codec, RejectsTruncatedAndOversizedMessages) {
  auto bytes = encode_request(Request{valid_create()}, 1);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_request(std::span<const uint8_t>(bytes.data(), n));
    EXPECT_FALSE(r.ok()) << "accepted a truncation to " << n << " bytes";
  }
  std::vector<uint8_t> big(kMaxRequestSize + 1, 0);
  auto r = decode_request(big);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("exceeds the limit"), std::string::npos) << r.error();

  // A payload longer than its type's, with the header length adjusted to match.
  bytes.push_back(0);
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.length = static_cast<uint32_t>(bytes.size());
  std::memcpy(bytes.data(), &h, sizeof h);
  r = decode_request(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("expected 64"), std::string::npos) << r.error();
}

void patch_header(std::vector<uint8_t>& bytes, const std::function<void(Header&)>& f) {
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  f(h);
  std::memcpy(bytes.data(), &h, sizeof h);
}

TEST(Codec, RejectsBadHeaders) {
  auto base = encode_request(ShowRequest{5}, 1);
  auto bad_magic = base;
  patch_header(bad_magic, [](Header& h) { h.magic = 0x12345678; });
  EXPECT_NE(decode_request(bad_magic).error().find("bad magic"), std::string::npos);

  auto bad_version = base;
  patch_header(bad_version, [](Header& h) { h.version = 9; });
  EXPECT_NE(decode_request(bad_version).error().find("version 9"), std::string::npos);

  auto bad_length = base;
  patch_header(bad_length, [](Header& h) { h.length = 200; });
  EXPECT_NE(decode_request(bad_length).error().find("header says 200"), std::string::npos);

  auto bad_type = base;
  patch_header(bad_type, [](Header& h) { h.type = 77; });
  EXPECT_NE(decode_request(bad_type).error().find("unknown message type 77"), std::string::npos);

  auto reply_as_request = base;
  patch_header(reply_as_request, [](Header& h) { h.type = 100; });
  EXPECT_FALSE(decode_request(reply_as_request).ok());
}

TEST(Codec, ValidatesFields) {
  auto expect_bad = [](Request req, const char* what) {
    auto r = decode_request(encode_request(req, 1));
    ASSERT_FALSE(r.ok()) << "accepted: " << what;
    EXPECT_NE(r.error().find(what), std::string::npos) << r.error();
  };
  auto c = valid_create();
  c.units = 0;
  expect_bad(c, "units 0");
  c = valid_create();
  c.units = 101;
  c.job_units = 101;
  expect_bad(c, "units 101");
  c = valid_create();
  c.job_units = 10;
  expect_bad(c, "job units 10");
  c = valid_create();
  c.mode = 3;
  expect_bad(c, "mode 3 is not burst (0), cap (1) or lend (2)");
  c = valid_create();
  c.flags = 8;
  expect_bad(c, "create flags");
  c = valid_create();
  c.gpu_index = 64;
  expect_bad(c, "gpu index 64");
  c = valid_create();
  c.job_id = 0;
  expect_bad(c, "job id 0");
  expect_bad(ResizeRequest{1, 0, kModeUnchanged, 0, 0}, "changes nothing");
  expect_bad(ResizeRequest{1, 150, 0, 0, 0}, "units 150");
  expect_bad(ResizeRequest{0, 10, 0, 0, 0}, "instance id 0");
  expect_bad(ResizeRequest{1, 10, 5, 0, 0}, "mode 5");
  expect_bad(StatusRequest{1, 0}, "status flags");
  expect_bad(RemoveRequest{1, 0, 3}, "reserved");
  expect_bad(AttachRequest{1, 0, 99}, "gpu index 99");
  expect_bad(ShowRequest{0}, "instance id 0");
  expect_bad(ObjectiveRequest{0, 99'000, 0, 40'000'000}, "instance id 0");
  expect_bad(ObjectiveRequest{1, 100'000, 0, 40'000'000}, "percentile 100000 not in (0, 100000)");
  expect_bad(ObjectiveRequest{1, 0, 0, 40'000'000}, "percentile 0 not in");
  expect_bad(ObjectiveRequest{1, 99'000, 0, 0}, "latency target 0 ns not in [1 ms, 600 s]");
  expect_bad(ObjectiveRequest{1, 99'000, 0, -5}, "latency target -5 ns");
  expect_bad(ObjectiveRequest{1, 99'000, 0, 601'000'000'000}, "latency target 601000000000 ns");
  expect_bad(ObjectiveRequest{1, 99'000, 7, 40'000'000}, "reserved");
  expect_bad(UsageRequest{0, 0, 0}, "usage: job id 0");
  expect_bad(UsageRequest{7, 0, 1}, "reserved");
}

TEST(Codec, ReplyRoundTripAndIdCheck) {
  Reply r;
  r.status = ReplyStatus::kOverAllocation;
  r.instance_id = 17;
  r.gpu_slot = 3;
  r.proc_slot = 5;
  r.flags = kReplyMore;
  r.text = "{\"a\":1}";
  auto bytes = encode_reply(r, 77);
  auto d = decode_reply(bytes, 77);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->status, ReplyStatus::kOverAllocation);
  EXPECT_EQ(d->instance_id, 17u);
  EXPECT_EQ(d->gpu_slot, 3u);
  EXPECT_EQ(d->proc_slot, 5u);
  EXPECT_EQ(d->flags, kReplyMore);
  EXPECT_EQ(d->text, r.text);
  EXPECT_FALSE(decode_reply(bytes, 78).ok());
  EXPECT_FALSE(decode_reply(std::span<const uint8_t>(bytes.data(), 20), 77).ok());
}

TEST(Codec, ReplyTextIsBoundedToOneMessage) {
  Reply r;
  r.text.assign(3 * kMaxReplySize, 'x');
  auto bytes = encode_reply(r, 1);
  EXPECT_EQ(bytes.size(), kMaxReplySize);
  EXPECT_TRUE(decode_reply(bytes, 1).ok());
}

TEST(Codec, RandomBytesNeverCrashAndAreMostlyRejected) {
  std::mt19937_64 rng(12345);
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes(rng() % 80);
    for (auto& b : bytes)
      b = static_cast<uint8_t>(rng());
    // Half the cases get a valid header so the payload checks are exercised.
    if (i % 2 == 0 && bytes.size() >= sizeof(Header)) {
      patch_header(bytes, [&](Header& h) {
        h.magic = kMagic;
        h.version = kVersion;
        h.type = static_cast<uint16_t>(1 + rng() % 6);
        h.length = static_cast<uint32_t>(bytes.size());
      });
    }
    auto r = decode_request(bytes);
    if (r.ok()) ++accepted;
    (void)decode_reply(bytes, 0);
  }
  EXPECT_LT(accepted, 2000u);
}

}  // namespace
}  // namespace egpu::protocol
