#include "colocation_sim.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "sim/faa_sim.h"

namespace egpu::slo::sim {
namespace {

// The exact q-quantile of `latencies` (sorted in place).
Nanos exact_quantile(std::vector<Nanos>& latencies, double q) {
  std::sort(latencies.begin(), latencies.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(latencies.size())));
  return latencies[std::max<std::size_t>(rank, 1) - 1];
}

}  // namespace

ColocationResult run_colocation(const std::vector<double>& levels, const ColocationOptions& o) {
  faa::sim::SimOptions sim_options;
  sim_options.tick = 250 * faa::kMicrosecond;
  sim_options.charge_period = 250 * faa::kMicrosecond;
  sim_options.hold_through_overrun = true;
  faa::sim::FaaSim sim(sim_options);

  uint32_t inference_units = o.inference_units;
  uint32_t training_units = o.training_units;
  Mode training_mode = Mode::kBurst;
  if (o.control == Control::kStaticPeak) {
    inference_units = o.static_peak_units;
    training_units = 100 - o.static_peak_units;
    training_mode = Mode::kCap;
  }
  const std::size_t inference = sim.add(inference_units / 100.0, Mode::kBurst,
                                        faa::sim::Workload::on_demand(o.inference_kernel));
  const std::size_t training =
      sim.add(training_units / 100.0, training_mode, faa::sim::Workload::greedy(o.training_kernel));

  SloController controller;
  ColocationResult result;
  result.duration = static_cast<Nanos>(o.minutes) * o.per_minute;

  // Poisson arrivals at the trace's rate, by thinning a peak-rate process.
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap_s(o.peak_requests_per_s);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  auto level_at = [&](Nanos t) {
    const std::size_t minute = o.first_minute + static_cast<std::size_t>(t / o.per_minute);
    return minute < levels.size() ? levels[minute] : 0.0;
  };
  Nanos next_arrival = static_cast<Nanos>(gap_s(rng) * 1e9);

  std::vector<Nanos> window_latencies;  // completed in the current 1 s window
  Nanos window_end = faa::kSecond;
  auto close_window = [&] {
    Nanos latency = 0;
    if (!window_latencies.empty()) {
      ++result.windows;
      latency = exact_quantile(window_latencies, o.objective.quantile());
      if (latency <= o.objective.target_ns) ++result.windows_met;
    }
    result.window_latency.push_back(latency);
    window_latencies.clear();
    window_end += faa::kSecond;
  };

  Nanos waited_before = 0;
  for (Nanos start = 0; start < result.duration; start += o.period) {
    const Nanos end = std::min(start + o.period, result.duration);
    while (next_arrival < end) {
      sim.run_until(next_arrival);
      if (coin(rng) < level_at(next_arrival)) sim.submit(inference, o.request_work);
      next_arrival += std::max<Nanos>(1, static_cast<Nanos>(gap_s(rng) * 1e9));
    }
    sim.run_until(end);
    LatencyHistogram period_latencies;
    for (const auto& done : sim.take_completions(inference)) {
      while (done.at > window_end)
        close_window();
      window_latencies.push_back(done.latency);
      period_latencies.record(done.latency);
      ++result.requests;
    }
    result.inference_units.push_back(inference_units);
    if (o.control != Control::kController) continue;

    SloInput critical;
    critical.id = 1;
    critical.role = SloRole::kLatencyCritical;
    critical.units = o.inference_units;
    if (o.inference_declares_objective) critical.objective = o.objective;
    critical.latencies = period_latencies;
    critical.device_ns = sim.used(inference, start, end);
    // What the agent reads from its scheduler: the time waited so far.
    const Nanos waited = sim.scheduler().stats(sim.id(inference), end).value().throttled;
    critical.waited_ns = waited - waited_before;
    waited_before = waited;
    SloInput lender;
    lender.id = 2;
    lender.role = o.training_role;
    lender.units = o.training_units;
    lender.device_ns = sim.used(training, start, end);
    const auto& states = controller.step({critical, lender}, end - start);
    const uint32_t next_inference = states[0].effective_units;
    const uint32_t next_training = states[1].effective_units;
    // Shrink first: the targets never add up to more than the GPU.
    if (next_inference > inference_units) {
      sim.resize(training, next_training / 100.0, Mode::kBurst);
      sim.resize(inference, next_inference / 100.0, Mode::kBurst);
    } else if (next_inference < inference_units) {
      sim.resize(inference, next_inference / 100.0, Mode::kBurst);
      sim.resize(training, next_training / 100.0, Mode::kBurst);
    }
    inference_units = next_inference;
  }
  close_window();
  result.inference_device = sim.used(inference, 0, result.duration);
  result.training_device = sim.used(training, 0, result.duration);
  return result;
}

}  // namespace egpu::slo::sim
