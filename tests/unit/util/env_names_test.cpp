// The EGPU_* names are documented to users and admins (README, gres/README):
// renaming one breaks job scripts and slurmd setups, so the names are pinned
// here as written, read through C as the Slurm plugin reads them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" const char* const egpu_test_env_names_from_c[];

namespace egpu {
namespace {

TEST(EnvNames, AreThePublicNames) {
  std::vector<std::string> names;
  for (const char* const* n = egpu_test_env_names_from_c; *n != nullptr; ++n)
    names.emplace_back(*n);
  const std::vector<std::string> documented = {"EGPU_GPU_INDICES", "EGPU_UNITS",  "EGPU_MEM_QUOTA",
                                               "EGPU_GPU_UUIDS",   "EGPU_NODE",   "EGPU_JOB_ID",
                                               "EGPU_STEP_ID",     "EGPU_SOCKET", "EGPU_FAIL_MODE",
                                               "EGPU_CONF",        "EGPU_DEBUG"};
  EXPECT_EQ(names, documented);
}

}  // namespace
}  // namespace egpu
