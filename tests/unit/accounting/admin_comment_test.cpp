#include "core/accounting/admin_comment.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/accounting/admin_comment_c.h"
#include "core/accounting/step_record.h"

namespace egpu::accounting {
namespace {

std::string record(uint32_t step, const std::string& node, uint32_t gpu, uint64_t device_s,
                   bool running = false) {
  StepRecord r;
  r.running = running;
  r.job_id = 7;
  r.step_id = step;
  r.node = node;
  r.usage.gpu = gpu;
  r.usage.units = 50;
  r.usage.totals.started_unix_ns = 0;
  r.usage.ended_unix_ns = 100'000'000'000;
  r.usage.totals.device_ns = device_s * 1'000'000'000;
  return format_step_record(r);
}

TEST(AdminComment, AppendsAfterTheAdminsTextAndKeepsItAsItWas) {
  const std::string a = record(0, "n1", 0, 10), b = record(0, "n2", 0, 20);
  auto first = merge_append_request("", append_request({a}), 7);
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(*first, a);
  // Another node's record of the same step: both stay.
  auto second = merge_append_request(*first, append_request({b}), 7);
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(*second, a + "; " + b);
  // An admin's note, separators and odd spacing included, stays as written.
  const std::string note = "checked by ops;  ticket 12; ";
  auto noted = merge_append_request(note, append_request({a, b}), 7);
  ASSERT_TRUE(noted) << noted.error();
  EXPECT_EQ(*noted, note + "; " + a + "; " + b);
  EXPECT_TRUE(noted->starts_with(note));
}

TEST(AdminComment, ARetriedRecordReplacesItsEarlierSelf) {
  const std::string a = record(1, "n1", 0, 10), a_again = record(1, "n1", 0, 11);
  const std::string other_gpu = record(1, "n1", 1, 12);
  auto merged = merge_append_request("note; " + a, append_request({a_again, other_gpu}), 7);
  ASSERT_TRUE(merged) << merged.error();
  EXPECT_EQ(*merged, "note; " + a_again + "; " + other_gpu);
}

TEST(AdminComment, CheckpointsGiveWayToTheFinalRecordNeverTheOtherWay) {
  const std::string first = record(1, "n1", 0, 10, true), later = record(1, "n1", 0, 20, true);
  const std::string final = record(1, "n1", 0, 25);
  auto c = merge_append_request("note", append_request({first}), 7);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, "note; " + first);
  c = merge_append_request(*c, append_request({later}), 7);  // a checkpoint replaces one
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, "note; " + later);
  c = merge_append_request(*c, append_request({final}), 7);  // the final one replaces it
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, "note; " + final);
  // A checkpoint that was on its way when the step ended changes nothing and
  // is not counted as dropped; the step's other GPU still gets its own.
  const std::string other_gpu = record(1, "n1", 1, 5, true);
  c = merge_append_request(*c, append_request({record(1, "n1", 0, 24, true), other_gpu}), 7);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, "note; " + final + "; " + other_gpu);
  EXPECT_EQ(records_in_comment(*c).dropped, 0u);
  // A full comment: checkpoints that do not fit are not counted (each
  // interval would count again); a final record that does not fit is.
  const size_t full = c->size() + 2;
  for (int i = 0; i < 3; ++i) {
    auto again = merge_append_request(*c, append_request({record(2, "n1", 0, 1, true)}), 7, full);
    ASSERT_TRUE(again) << again.error();
    EXPECT_EQ(*again, *c);
  }
  auto lost = merge_append_request(*c, append_request({record(2, "n1", 0, 1)}), 7, full);
  ASSERT_TRUE(lost) << lost.error();
  EXPECT_EQ(records_in_comment(*lost).dropped, 1u);
}

TEST(AdminComment, RecordsPastTheLimitAreCountedNotKept) {
  const std::string a = record(0, "n1", 0, 1);
  const size_t limit = a.size() * 2 + 40;  // room for two records and the count
  std::string comment;
  for (uint32_t step = 0; step < 5; ++step) {
    auto merged =
        merge_append_request(comment, append_request({record(step, "n1", 0, 1)}), 7, limit);
    ASSERT_TRUE(merged) << merged.error();
    comment = *merged;
    EXPECT_LE(comment.size(), limit);
  }
  EXPECT_EQ(comment, record(0, "n1", 0, 1) + "; " + record(1, "n1", 0, 1) + "; egpu dropped=3");
  // A retry of a kept record still replaces it; the count stays last.
  auto retried = merge_append_request(comment, append_request({record(1, "n1", 0, 2)}), 7, limit);
  ASSERT_TRUE(retried) << retried.error();
  EXPECT_EQ(*retried, record(0, "n1", 0, 1) + "; " + record(1, "n1", 0, 2) + "; egpu dropped=3");
  // A longer replacement that would pass the limit is counted instead.
  auto longer = merge_append_request(*retried, append_request({record(1, "n1", 0, 123456789)}), 7,
                                     retried->size() + 2);
  ASSERT_TRUE(longer) << longer.error();
  EXPECT_EQ(*longer, record(0, "n1", 0, 1) + "; " + record(1, "n1", 0, 2) + "; egpu dropped=4");
  // An admin's text that only looks like the count is theirs; counts add up.
  auto kept = merge_append_request("egpu dropped=some; egpu dropped=2; egpu dropped=1",
                                   append_request({record(0, "n1", 0, 1)}), 7);
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ(*kept, "egpu dropped=some; " + record(0, "n1", 0, 1) + "; egpu dropped=3");
}

// A job that fills its comment with the records of trivial steps (about
// 330 of them) pushed every later record out, its heavy steps' included:
// only a count was left of them. A final record now takes the place of
// those of less device time, least first; checkpoints take no one's.
TEST(AdminComment, AFullCommentKeepsTheRecordsOfMostDeviceTime) {
  std::string comment = "note";
  for (uint32_t step = 0; step < 1000; ++step) {
    auto merged = merge_append_request(comment, append_request({record(step, "n1", 0, 0)}), 7);
    ASSERT_TRUE(merged) << merged.error();
    comment = *merged;
  }
  const size_t trivial = records_in_comment(comment).records.size();
  ASSERT_LT(trivial, 1000u) << "the comment never filled: nothing to test";
  const uint64_t dropped_before = records_in_comment(comment).dropped;
  const std::string heavy = record(5000, "n1", 0, 3600);
  auto merged = merge_append_request(comment, append_request({heavy}), 7);
  ASSERT_TRUE(merged) << merged.error();
  EXPECT_NE(merged->find(heavy), std::string::npos) << "the heavy step's record was left out";
  EXPECT_LE(merged->size(), kMaxAdminComment);
  EXPECT_TRUE(merged->starts_with("note; ")) << "the admin's text was taken";
  const auto after = records_in_comment(*merged);
  // What left to make room is counted, one for one.
  EXPECT_EQ(after.records.size() + after.dropped, trivial + dropped_before + 1);
  EXPECT_GT(after.dropped, dropped_before);
  // Merged again: nothing changes.
  auto again = merge_append_request(*merged, append_request({heavy}), 7);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(*again, *merged);
  // A checkpoint of more device time takes nobody's place.
  auto running =
      merge_append_request(*merged, append_request({record(5001, "n1", 0, 7200, true)}), 7);
  ASSERT_TRUE(running) << running.error();
  EXPECT_EQ(*running, *merged);
  // Nor does a final record of no more device time than the least kept.
  auto light = merge_append_request(*merged, append_request({record(5002, "n1", 0, 0)}), 7);
  ASSERT_TRUE(light) << light.error();
  EXPECT_EQ(records_in_comment(*light).records, after.records);
  EXPECT_EQ(records_in_comment(*light).dropped, after.dropped + 1);
}

// Merging the same request twice changes nothing, even when one of its
// records makes room for another: a new checkpoint listed before a final
// record that replaces a longer checkpoint (found by the admin_comment
// fuzzer: the checkpoint was judged before the room was made, and fitted
// only the second time).
TEST(AdminComment, ARequestMergedAgainChangesNothingWhenOneRecordMakesRoom) {
  const std::string longer = record(1, "n2", 0, 999'999'999'999, true);  // more digits
  const std::string comment = "note; " + longer;
  const std::string checkpoint = record(2, "n1", 0, 3, true);
  const std::string final = record(1, "n2", 0, 2);
  // Room for the final record and the new checkpoint (and the dropped count
  // the merge keeps room for), but not for the longer checkpoint and the new one.
  const size_t limit = std::string("note; ").size() + final.size() + 2 + checkpoint.size() + 2 +
                       std::string("egpu dropped=").size() + 20;
  ASSERT_GT(longer.size(), final.size() + 10);
  const std::string request = append_request({checkpoint, final});
  auto once = merge_append_request(comment, request, 7, limit);
  ASSERT_TRUE(once) << once.error();
  EXPECT_EQ(*once, "note; " + final + "; " + checkpoint);
  auto twice = merge_append_request(*once, request, 7, limit);
  ASSERT_TRUE(twice) << twice.error();
  EXPECT_EQ(*twice, *once);
  // Within one request a final record wins over a checkpoint of its key,
  // whichever comes first.
  auto both = merge_append_request("note", append_request({final, record(1, "n2", 0, 3, true)}), 7);
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(*both, "note; " + final);
}

TEST(AdminComment, RefusesRequestsThatAreNotRecords) {
  EXPECT_FALSE(merge_append_request("x", "egpu step=1.0", 7));  // no prefix
  EXPECT_FALSE(merge_append_request("x", "egpu-append:", 7));
  EXPECT_FALSE(merge_append_request("x", "egpu-append:hello", 7));
  // One bad record spoils the request: nothing is appended.
  auto bad =
      merge_append_request("x", append_request({record(0, "n1", 0, 1), "egpu dropped=0"}), 7);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("egpu dropped=0"), std::string::npos) << bad.error();
  // Another job's records: a request addressed to this job must hold its own.
  auto other = merge_append_request("x", append_request({record(0, "n1", 0, 1)}), 8);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().find("not job 8's"), std::string::npos) << other.error();
  EXPECT_TRUE(is_append_request("egpu-append:x"));
  EXPECT_FALSE(is_append_request("note egpu-append:x"));
}

TEST(AdminComment, RecordsAreReadBackWithoutTheAdminsText) {
  const std::string a = record(0, "n1", 0, 1), b = record(1, "n2", 3, 2);
  const auto found =
      records_in_comment("note; egpu step=bogus; " + a + "; " + b + "; egpu dropped=4");
  EXPECT_EQ(found.records, (std::vector<std::string>{a, b}));
  EXPECT_EQ(found.dropped, 4u);
  EXPECT_TRUE(records_in_comment("").records.empty());
  std::vector<std::pair<std::string, std::string>> fields;
  ASSERT_TRUE(parse_step_record(b, &fields));
  ASSERT_GE(fields.size(), 9u);
  EXPECT_EQ(fields[0], (std::pair<std::string, std::string>{"step", "7.1"}));
  EXPECT_EQ(fields[2], (std::pair<std::string, std::string>{"gpu", "3"}));
  EXPECT_EQ(fields[5], (std::pair<std::string, std::string>{"device_s", "2.000"}));
}

TEST(AdminCommentC, MergesAndReportsErrors) {
  EXPECT_EQ(egpu_admin_comment_is_append(nullptr), 0);
  EXPECT_EQ(egpu_admin_comment_is_append("site"), 0);
  const std::string request = append_request({record(0, "n1", 0, 3)});
  EXPECT_EQ(egpu_admin_comment_is_append(request.c_str()), 1);
  char* out = nullptr;
  char err[256] = "";
  ASSERT_EQ(egpu_admin_comment_merge(nullptr, request.c_str(), 7, &out, err, sizeof err), 0) << err;
  EXPECT_EQ(std::string(out), record(0, "n1", 0, 3));
  std::free(out);
  EXPECT_EQ(egpu_admin_comment_merge("note", "egpu-append:junk", 7, &out, err, sizeof err), -1);
  EXPECT_EQ(out, nullptr);
  EXPECT_NE(std::string(err).find("junk"), std::string::npos) << err;
  EXPECT_EQ(egpu_admin_comment_merge("note", nullptr, 7, nullptr, err, sizeof err), -1);
}

// sacct and squeue list the comment of each job of an array or
// heterogeneous job on a line of its own: records on either side of a line
// break were read as one malformed part and dropped.
TEST(AdminComment, EachLineOfAListingIsAComment) {
  const std::string a = record(0, "n1", 0, 10), b = record(1, "n1", 0, 20),
                    c = record(2, "n2", 1, 30);
  const CommentRecords found = records_in_comment(a + "; " + b + "\n(null)\n" + c + "\n");
  EXPECT_EQ(found.records, (std::vector<std::string>{a, b, c}));
}

}  // namespace
}  // namespace egpu::accounting
