// What egpuctl reads from squeue and scontrol to act on a job from any node.
#include "core/model/slurm_listing.h"

#include <gtest/gtest.h>

namespace egpu::model {
namespace {

TEST(SlurmListing, AJobLineGivesStateOwnerAndNodes) {
  EXPECT_TRUE(parse_job_listing("RUNNING|alice@example.org|n1\n", 12));
  auto p = parse_job_listing("RUNNING|alice|n[1-2,7]\n", 12);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->state, "RUNNING");
  EXPECT_EQ(p->user, "alice");
  EXPECT_EQ(p->nodelist, "n[1-2,7]");
}

TEST(SlurmListing, AJobThatDoesNotRunIsNamed) {
  auto none = parse_job_listing("", 12);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), "job 12 is not known to Slurm (ended, or never submitted)");
  auto pending = parse_job_listing("PENDING|alice|\n", 12);
  ASSERT_FALSE(pending);
  EXPECT_EQ(pending.error(), "job 12 is PENDING, not running");
}

TEST(SlurmListing, MalformedJobLinesAreErrors) {
  for (const char* text :
       {"RUNNING|alice\n", "RUNNING|al ice|n1\n", "RUNNING|alice|n1;rm\n", "RUNNING|-rf|n1\n",
        "RUNNING|alice|n1\nRUNNING|bob|n2\n", "|alice|n1\n", "RUNNING|alice|n1|x\n"}) {
    EXPECT_FALSE(parse_job_listing(text, 12)) << text;
  }
}

// A heterogeneous job's components (or an array's tasks): one line each.
TEST(SlurmListing, SeveralLinesOfOneOwnerAreOneJobOnAllTheirNodes) {
  auto p = parse_job_listing("RUNNING|alice|n[1-2]\nPENDING|alice|\nRUNNING|alice|n7\n", 12);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->nodelist, "n[1-2],n7");
  EXPECT_EQ(p->state, "RUNNING");
  EXPECT_FALSE(parse_job_listing("PENDING|alice|\nPENDING|alice|\n", 12));
}

TEST(SlurmListing, StepsOfArrayTasksAndHeterogeneousJobsAreRead) {
  auto steps = parse_step_listing("1000_3.0|n1\n12+1.2|n[3-4]\n12.batch|n1\n", 12);
  ASSERT_TRUE(steps) << steps.error();
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_EQ((*steps)[0].step, "0");
  EXPECT_EQ((*steps)[1].step, "2");
  EXPECT_EQ((*steps)[1].nodelist, "n[3-4]");
}

TEST(SlurmListing, StepLinesGiveEachStepsNodes) {
  auto steps = parse_step_listing("12.0|n[1-2]\n12.batch|n1\n12.extern|n[1-2]\n", 12);
  ASSERT_TRUE(steps) << steps.error();
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_EQ((*steps)[1].step, "batch");
  auto zero = step_nodelist(*steps, 12, "0");
  ASSERT_TRUE(zero);
  EXPECT_EQ(*zero, "n[1-2]");
  auto missing = step_nodelist(*steps, 12, "3");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), "step 12.3 is not running (running: 12.0, 12.batch, 12.extern)");
  auto empty = parse_step_listing("", 12);
  ASSERT_TRUE(empty);
  EXPECT_EQ(step_nodelist(*empty, 12, "0").error(),
            "step 12.0 is not running (the job runs no steps)");
}

TEST(SlurmListing, StepLinesOfAnotherJobOrMalformedAreLeftOut) {
  for (const char* text : {"13.0|n1\n", "120.0|n1\n", "12.0\n", "12.0|n1|x\n", "12.|n1\n",
                           "12.0|n1 n2\n", "12.-x|n1\n", "x_1.0|n1\n", "12_a.0|n1\n"}) {
    auto steps = parse_step_listing(text, 12);
    ASSERT_TRUE(steps) << text;
    EXPECT_TRUE(steps->empty()) << text;
  }
}

TEST(SlurmListing, HostnamesAreOnePerLineAndPlain) {
  auto names = parse_hostnames("n1\nn2\n\nnode-3.cluster\n");
  ASSERT_TRUE(names) << names.error();
  EXPECT_EQ(*names, (std::vector<std::string>{"n1", "n2", "node-3.cluster"}));
  EXPECT_FALSE(parse_hostnames(""));
  EXPECT_FALSE(parse_hostnames("n1\n--nodelist=evil\n"));
  EXPECT_FALSE(parse_hostnames("n1 n2\n"));
}

}  // namespace
}  // namespace egpu::model
