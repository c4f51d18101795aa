// Long kernels overrun their slices; measured charging keeps shares right.
#include <gtest/gtest.h>

#include "sim/faa_sim.h"
#include "test_support.h"

namespace egpu::faa::test {
namespace {

TEST(Overrun, FiftyMillisecondKernelsConvergeToFiftyFifty) {
  sim::FaaSim sim(sim::SimOptions{});
  const std::size_t long_kernels =
      sim.add(0.5, Mode::kBurst, sim::Workload::greedy(50 * kMillisecond));
  const std::size_t short_kernels = sim.add(0.5, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  const Nanos run = 5 * kSecond;
  sim.run_until(run);
  EXPECT_NEAR(sim.share(long_kernels, 0, run), 0.5, 0.03);
  EXPECT_NEAR(sim.share(short_kernels, 0, run), 0.5, 0.03);
  // Charged in full: what the scheduler saw is what the device did (less what
  // ran in the last, not yet charged tick).
  const Result<InstanceStats> stats = sim.scheduler().stats(sim.id(long_kernels), run);
  ASSERT_TRUE(stats.ok());
  EXPECT_NEAR(static_cast<double>(stats.value().charged),
              static_cast<double>(sim.used(long_kernels, 0, run)), 100.0 * kMicrosecond);
}

TEST(Overrun, ChargedLateEveryMillisecondStillConverges) {
  sim::SimOptions options;
  options.charge_period = kMillisecond;
  sim::FaaSim sim(options);
  const std::size_t long_kernels =
      sim.add(0.3, Mode::kBurst, sim::Workload::greedy(20 * kMillisecond));
  const std::size_t short_kernels = sim.add(0.7, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  const Nanos run = 5 * kSecond;
  sim.run_until(run);
  EXPECT_NEAR(sim.share(long_kernels, 0, run), 0.3, 0.03);
  EXPECT_NEAR(sim.share(short_kernels, 0, run), 0.7, 0.03);
}

// A solver step of 20 ms (twice the slice), then 5 ms of host work, against
// short kernels at 60%: the solver becomes due during the other's runs of
// slices and, as in the agent, keeps the device through its overrun.
TEST(Overrun, ClosedLoopLongKernelsGetTheirShareAgainstShortOnes) {
  sim::SimOptions options;
  options.hold_through_overrun = true;
  options.charge_period = kMillisecond;
  options.config.tau = 250 * kMillisecond;  // the agent's default (window 500 ms)
  sim::FaaSim sim(options);
  const std::size_t solver =
      sim.add(0.4, Mode::kBurst, sim::Workload::closed_loop(20 * kMillisecond, 5 * kMillisecond));
  const std::size_t training = sim.add(0.6, Mode::kBurst, sim::Workload::greedy(kSimKernel));
  const Nanos from = kSecond;
  const Nanos to = 6 * kSecond;
  sim.run_until(to);
  const double total = sim.share(solver, from, to) + sim.share(training, from, to);
  EXPECT_GE(total, 0.999);
  EXPECT_NEAR(sim.share(solver, from, to), 0.4, 0.005);
  EXPECT_NEAR(sim.share(training, from, to), 0.6, 0.005);
}

}  // namespace
}  // namespace egpu::faa::test
