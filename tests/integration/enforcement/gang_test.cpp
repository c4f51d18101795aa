// A data-parallel step's ranks on two GPUs beside greedy co-tenants, with
// the real agent and shim on simgpu: sliced as a gang they keep the rate
// their share allows; sliced independently (reported beside it) their
// all-reduces wait for each other's slices. Co-tenants keep their share.
#include <gtest/gtest.h>

#include <cstdio>

#include "gang_scenario.h"

namespace egpu::integration {
namespace {

TEST(Gang, RanksKeepTheRateTheirShareAllowsAndCotenantsKeepTheirShare) {
  const GangRun alone = run_gang_step({.gang = true, .rank_units = 100, .cotenants = false});
  ASSERT_TRUE(alone.ok);
  const GangRun gang = run_gang_step({});
  const GangRun independent = run_gang_step({.gang = false});
  ASSERT_TRUE(gang.ok && independent.ok);
  const double gang_ratio = gang_iteration_ratio(gang, alone, 50);
  const double independent_ratio = gang_iteration_ratio(independent, alone, 50);
  std::printf(
      "alone %.1f it/s; gang %.1f it/s (ratio %.3f), co-tenants %.3f, worst window %.2f pp "
      "below; independent %.1f it/s (ratio %.3f), co-tenants %.3f, worst window %.2f pp below\n",
      alone.iterations_per_s, gang.iterations_per_s, gang_ratio, gang.cotenant_share,
      gang.cotenant_worst_window_pp, independent.iterations_per_s, independent_ratio,
      independent.cotenant_share, independent.cotenant_worst_window_pp);
  // The bars hold on a loaded 2-core host (with a CPU hog beside it: ratio
  // 0.95-0.97, co-tenants 0.480-0.481 of their GPU, worst window 3.9-4.1 pp
  // below, independent ratio 0.13); the figures against the 0.9 are
  // scripts/bench --only gang's, on a quiet machine (0.99). A busy host
  // delays the ranks' launches: a collective waiting for a late peer spins
  // past its window, and the gang pays that back in skipped windows (with
  // three hogs: ratio 0.69-0.93, co-tenants 0.462-0.471, worst window
  // 7.3-16.4 pp below, independent ratio 0.23-0.25).
  EXPECT_GE(gang_ratio, 0.6);
  EXPECT_GE(gang_ratio, 2 * independent_ratio);  // what gangs are for
  // Greedy co-tenants of 1 ms kernels: a kernel launched just before a
  // window opens runs into it (the gate cannot stop it), so they stay within
  // the long-kernel bars rather than the short-kernel ones (README).
  EXPECT_GE(gang.cotenant_share, 0.44);
  EXPECT_LE(gang.cotenant_worst_window_pp, 15.0);
  // Sliced independently, the ranks' spinning all-reduces outlast their
  // slices into the co-tenants' time: gangs are no worse for them.
  EXPECT_GE(gang.cotenant_share, independent.cotenant_share - 0.01);
}

}  // namespace
}  // namespace egpu::integration
