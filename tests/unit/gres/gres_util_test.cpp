// Unit tests of the Slurm-independent parts of gres/: the TRES request parser
// used by job_submit/egpu, and the removal of variables from a step's env. (gres/egpu reads
// egpu.conf through core/config's C API, tested in tests/unit/config.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "egpu_env_list.h"
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

// An environment submitted through Slurm's API may name a variable twice in
// a row. Slurm's unsetenvp() removed the first and stepped past the second,
// which then reached SPANK as the step's egpu allocation on a step Slurm gave
// none: every copy must go, and nothing else.
TEST(EgpuEnvList, RemovesEveryCopyOfTheVariableAndOnlyIt) {
  std::vector<char*> env;
  for (const char* e : {"EGPU_UNITS=100", "EGPU_UNITS=100", "EGPU_UNITS_X=1", "PATH=/bin",
                        "EGPU_UNITS=50", "EGPU_UNITS", "EGPU_UNITS=100"}) {
    env.push_back(strdup(e));
  }
  env.push_back(nullptr);
  static int released;
  released = 0;
  const size_t removed = egpu_env_remove_all(env.data(), "EGPU_UNITS", [](char* entry) {
    ++released;
    std::free(entry);
  });
  EXPECT_EQ(removed, 4u);
  EXPECT_EQ(released, 4);
  // Slurm appends after the last non-NULL slot of the array: every slot
  // freed is NULL, or what it appends lands past the terminator.
  for (size_t i = 3; i < env.size(); ++i)
    EXPECT_EQ(env[i], nullptr) << "slot " << i;
  std::vector<std::string> left;
  for (char** p = env.data(); *p != nullptr; ++p) {
    left.emplace_back(*p);
    std::free(*p);
  }
  EXPECT_EQ(left, (std::vector<std::string>{"EGPU_UNITS_X=1", "PATH=/bin", "EGPU_UNITS"}));
  EXPECT_EQ(egpu_env_remove_all(nullptr, "EGPU_UNITS", nullptr), 0u);
}

}  // namespace
