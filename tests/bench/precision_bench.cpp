#include "precision_bench.h"

#include <cmath>
#include <cstdio>

#include "round_stats.h"

namespace egpu::bench {

nlohmann::json run_precision_bench(const integration::ScenarioTiming& timing) {
  nlohmann::json cases = nlohmann::json::array();
  for (const integration::Scenario& scenario : integration::bench_scenarios()) {
    std::fprintf(stderr, "egpu-bench: precision case %s\n", scenario.name.c_str());
    const integration::ScenarioRun run = integration::run_scenario(scenario, timing);
    std::fprintf(stderr, "%s", harness::format_report(run.report, run.targets).c_str());
    nlohmann::json targets = nlohmann::json::object();
    nlohmann::json achieved = nlohmann::json::object();
    nlohmann::json worst = nlohmann::json::object();
    nlohmann::json of_wall = nlohmann::json::object();
    bool within = run.report.span_s > 0;
    for (const integration::ScenarioMember& m : scenario.members) {
      const double target = run.targets.at(m.label);
      const double share = run.report.share(m.label);
      const double window_pp = run.report.worst_window_deviation_pp(m.label, target);
      targets[m.label] = m.units;
      achieved[m.label] = rounded(share * 100.0, 2);
      worst[m.label] = rounded(window_pp, 2);
      of_wall[m.label] = rounded(run.wall.share(m.label) * 100.0, 2);
      within = within && std::abs(share - target) * 100.0 <= scenario.whole_tolerance_pp &&
               window_pp <= scenario.window_tolerance_pp;
    }
    cases.push_back(
        {{"case", scenario.name},
         {"targets", targets},
         {"achieved", achieved},
         {"worst_window_pp", worst},
         {"gpu_busy_pct", rounded(run.utilisation * 100.0, 2)},
         {"achieved_of_wall_time", of_wall},
         {"measured_s", rounded(run.report.span_s, 2)},
         {"bars",
          {{"whole_pp", scenario.whole_tolerance_pp}, {"window_pp", scenario.window_tolerance_pp}}},
         {"within_bars", within}});
  }
  return cases;
}

}  // namespace egpu::bench
