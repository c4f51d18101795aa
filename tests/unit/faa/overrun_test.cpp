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

}  // namespace
}  // namespace egpu::faa::test
