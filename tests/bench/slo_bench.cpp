// slo_bench: the latency-objective figures of scripts/bench (--only slo). An
// inference server replays the GenTD26 container trace (tests/data/gentd26,
// four hours of it, a trace minute lasting 10 s) beside greedy training on
// one GPU, in simulated time under the real FAA scheduler and the real
// SloController (tests/unit/slo/colocation_sim.h): deterministic, so the
// figures are the policy's, not the machine's. Prints ONE JSON object with
// the four keys of issue 12; the runs' details go to stderr.
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>

#include "colocation_sim.h"
#include "rate_trace.h"

namespace {

using egpu::slo::sim::ColocationOptions;
using egpu::slo::sim::ColocationResult;
using egpu::slo::sim::Control;

ColocationResult run(const std::vector<double>& levels, Control control, const char* name) {
  ColocationOptions o;
  o.control = control;
  o.first_minute = 0;
  o.minutes = 240;
  o.per_minute = 10 * egpu::faa::kSecond;
  const ColocationResult r = egpu::slo::sim::run_colocation(levels, o);
  std::fprintf(stderr,
               "slo_bench: %-12s p99 <= 40 ms in %.4f of %zu windows, %zu requests, training %.4f "
               "of the leftover, %.1f s of training device time\n",
               name, r.attainment(), r.windows, r.requests, r.training_share_of_leftover(),
               static_cast<double>(r.training_device) / 1e9);
  return r;
}

double rounded(double v) {
  return static_cast<double>(static_cast<long long>(v * 10000 + 0.5)) / 10000;
}

}  // namespace

int main() {
  try {
    const auto levels = egpu::test::load_rate_levels(EGPU_GENTD26_TRACE);
    const ColocationResult controlled = run(levels, Control::kController, "controlled");
    const ColocationResult none = run(levels, Control::kNone, "no control");
    const ColocationResult peak = run(levels, Control::kStaticPeak, "static peak");
    nlohmann::json out;
    out["slo_attainment"] = rounded(controlled.attainment());
    out["slo_attainment_uncontrolled"] = rounded(none.attainment());
    out["training_share_of_leftover"] = rounded(controlled.training_share_of_leftover());
    out["training_vs_static_peak"] = rounded(static_cast<double>(controlled.training_device) /
                                             static_cast<double>(peak.training_device));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "slo_bench: %s\n", e.what());
    return 1;
  }
}
