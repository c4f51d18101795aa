// Unit tests of the Slurm-independent parts of gres/: the TRES request parser
// used by job_submit/egpu. (gres/egpu reads egpu.conf through core/config's C
// API, tested in tests/unit/config.)
#include <gtest/gtest.h>

#include "egpu_request.h"

namespace {

uint64_t Units(const char* tres, egpu_request_status_t want) {
  uint64_t units = 12345;
  EXPECT_EQ(egpu_request_units(tres, &units), want) << tres;
  return units;
}

TEST(EgpuRequest, ReadsBothReleasesFormats) {
  EXPECT_EQ(Units("gres/egpu:30", EGPU_REQUEST_FOUND), 30u);  // 24.11
  EXPECT_EQ(Units("gres:egpu:30", EGPU_REQUEST_FOUND), 30u);  // 22.05
  EXPECT_EQ(Units("gres/egpu:v100:70", EGPU_REQUEST_FOUND), 70u);
  EXPECT_EQ(Units("gres/egpu", EGPU_REQUEST_FOUND), 1u);
  EXPECT_EQ(Units("gres/egpu:v100", EGPU_REQUEST_FOUND), 1u);
  EXPECT_EQ(Units("gres/egpu:0", EGPU_REQUEST_FOUND), 0u);
  EXPECT_EQ(Units("gres/egpu:2k", EGPU_REQUEST_FOUND), 2048u);
}

TEST(EgpuRequest, IgnoresOtherGres) {
  Units("gres/gpu:2", EGPU_REQUEST_NONE);
  Units("gres/egpux:2", EGPU_REQUEST_NONE);
  Units("", EGPU_REQUEST_NONE);
  Units(nullptr, EGPU_REQUEST_NONE);
  EXPECT_EQ(Units("gres/gpu:1,gres/egpu:40", EGPU_REQUEST_FOUND), 40u);
}

// Slurm allocates only the last of several egpu entries (and refuses every
// step of such a job), so the request is refused; the sum was taken before.
TEST(EgpuRequest, SeveralEgpuEntriesAreTheirOwnStatus) {
  EXPECT_EQ(Units("gres/egpu:a:40,gres/egpu:b:80", EGPU_REQUEST_SEVERAL), 80u);
  EXPECT_EQ(Units("gres:egpu:t4:20,gres:egpu:t4:30", EGPU_REQUEST_SEVERAL), 30u);
  EXPECT_EQ(Units("gres/egpu:10,gres/gpu:1,gres/egpu", EGPU_REQUEST_SEVERAL), 1u);
  // An unreadable entry is BAD wherever it stands.
  Units("gres/egpu:10,gres/egpu:20,gres/egpu:x:y:1", EGPU_REQUEST_BAD);
}

TEST(EgpuRequest, RejectsUnreadableCounts) {
  // Counts past 64 bits, by digits or by suffix, and a count with a typo
  // (Slurm would take them for a type no GPU has: 1 unit of it, here before).
  Units("gres/egpu:30q", EGPU_REQUEST_BAD);
  Units("gres/egpu:18446744073709551616", EGPU_REQUEST_BAD);
  Units("gres/egpu:a:17179869184g", EGPU_REQUEST_BAD);
  Units("gres/egpu:v100:x", EGPU_REQUEST_BAD);
  Units("gres/egpu:a:b:3", EGPU_REQUEST_BAD);
  Units("gres/egpu:v100:12q", EGPU_REQUEST_BAD);
}

}  // namespace
