// The latency controller closed around the real FAA scheduler, in simulated
// time, with an inference server driven by a production request-rate trace
// (GenTD26, one container, a trace minute lasting 10 s) beside greedy
// training: what issue 12 asks of it, judged by measured request latencies
// and device time. Deterministic: a seeded arrival process, no wall clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "colocation_sim.h"
#include "rate_trace.h"

namespace egpu::slo::sim {
namespace {

const std::vector<double>& trace() {
  static const std::vector<double> levels = test::load_rate_levels(EGPU_GENTD26_TRACE);
  return levels;
}

// Two hours of the trace: a morning tide with its bursts (peak demand 27% of
// the GPU against the inference's 20 units).
ColocationOptions two_hours(Control control) {
  ColocationOptions o;
  o.control = control;
  o.first_minute = 0;
  o.minutes = 120;
  o.per_minute = 10 * faa::kSecond;
  return o;
}

ColocationResult run(const ColocationOptions& o, const char* name) {
  const ColocationResult r = run_colocation(trace(), o);
  std::printf(
      "%-22s p99 <= %lld ms in %.3f of %zu windows (%zu requests); inference %.3f of the GPU, "
      "training %.3f of the rest\n",
      name, static_cast<long long>(o.objective.target_ns / faa::kMillisecond), r.attainment(),
      r.windows, r.requests,
      static_cast<double>(r.inference_device) / static_cast<double>(r.duration),
      r.training_share_of_leftover());
  return r;
}

std::size_t changes(const std::vector<uint32_t>& units, std::size_t from) {
  std::size_t n = 0;
  for (std::size_t i = std::max<std::size_t>(from, 1); i < units.size(); ++i)
    n += units[i] != units[i - 1] ? 1 : 0;
  return n;
}

TEST(Colocation, TheObjectiveHoldsUnderTheProductionTraceAndTrainingTakesTheRest) {
  ASSERT_FALSE(trace().empty());
  const ColocationResult r = run(two_hours(Control::kController), "controlled");
  ASSERT_GT(r.windows, 500u);
  EXPECT_GE(r.attainment(), 0.99);
  EXPECT_GE(r.training_share_of_leftover(), 0.90);
  // It borrowed (the objective needed it) and gave back (it did not always).
  const auto [low, high] = std::minmax_element(r.inference_units.begin(), r.inference_units.end());
  EXPECT_EQ(*low, 20u);
  EXPECT_GT(*high, 20u);
}

TEST(Colocation, ControlHoldsWhatNoControlMissesAndTrainsMoreThanAStaticPeakSplit) {
  const ColocationResult controlled = run(two_hours(Control::kController), "controlled");
  const ColocationResult none = run(two_hours(Control::kNone), "no control");
  const ColocationResult peak = run(two_hours(Control::kStaticPeak), "static split for peak");
  EXPECT_LT(none.attainment(), 0.9);
  EXPECT_GE(controlled.attainment(), 0.99);
  // The static split holds the objective too, but its training is capped.
  EXPECT_GE(peak.attainment(), 0.99);
  const double ratio =
      static_cast<double>(controlled.training_device) / static_cast<double>(peak.training_device);
  std::printf("training with control / with the static peak split: %.3f\n", ratio);
  EXPECT_GT(ratio, 1.2);
}

TEST(Colocation, WithoutAnObjectiveOrALenderTheSharesArePlainFaa) {
  const ColocationResult none = run(two_hours(Control::kNone), "no control");
  ColocationOptions off = two_hours(Control::kController);
  off.inference_declares_objective = false;
  ColocationOptions no_lender = two_hours(Control::kController);
  no_lender.training_role = SloRole::kGuaranteed;
  for (const ColocationOptions& o : {off, no_lender}) {
    const ColocationResult r =
        run(o, o.inference_declares_objective ? "no lender" : "objective off");
    EXPECT_EQ(changes(r.inference_units, 0), 0u);
    EXPECT_EQ(r.inference_units.front(), 20u);
    // Nothing moved: the very same run as without a controller.
    EXPECT_EQ(r.training_device, none.training_device);
    EXPECT_EQ(r.windows_met, none.windows_met);
  }
}

TEST(Colocation, ASteadyLoadGetsASteadyShare) {
  const std::vector<double> steady(30, 1.0);  // 30 trace minutes at the peak rate
  ColocationOptions o = two_hours(Control::kController);
  o.minutes = steady.size();
  const ColocationResult r = run_colocation(steady, o);
  // After the first 30 s it moves at most twice (a tail it had not seen at
  // the share it tried), and in the second quarter hour not at all.
  const std::size_t settled = 300;
  EXPECT_LE(changes(r.inference_units, settled), 2u);
  EXPECT_EQ(changes(r.inference_units, r.inference_units.size() / 2), 0u);
  EXPECT_GT(r.inference_units.back(), 20u);
  EXPECT_GE(r.attainment(), 0.99);
  std::printf("steady load: %u units at the end, %zu changes after 30 s, attainment %.3f\n",
              r.inference_units.back(), changes(r.inference_units, settled), r.attainment());
}

TEST(Colocation, TheSameRunGivesTheSameDecisions) {
  const ColocationResult a = run_colocation(trace(), two_hours(Control::kController));
  const ColocationResult b = run_colocation(trace(), two_hours(Control::kController));
  EXPECT_EQ(a.inference_units, b.inference_units);
  EXPECT_EQ(a.window_latency, b.window_latency);
}

}  // namespace
}  // namespace egpu::slo::sim
