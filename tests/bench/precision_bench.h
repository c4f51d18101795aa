// Enforcement precision: the scenario table of the precision tests (plus
// sync-every-kernel against greedy), achieved shares against targets.
#pragma once

#include <nlohmann/json.hpp>

#include "scenarios.h"

namespace egpu::bench {

// [{case, targets, achieved, worst_window_pp, bars, within_bars}, ...], shares
// in percent, keyed by workload label.
nlohmann::json run_precision_bench(const integration::ScenarioTiming& timing);

}  // namespace egpu::bench
