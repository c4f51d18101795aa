// Cost of FAA decisions. Every instance asks all the time; each iteration is
// what the agent does at a slice end: charge the holder its slice, then a
// decide() that picks the next holder.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "core/faa/slice_scheduler.h"

namespace {

using egpu::Mode;
using egpu::Result;
using egpu::faa::Config;
using egpu::faa::InstanceId;
using egpu::faa::kMillisecond;
using egpu::faa::Nanos;
using egpu::faa::SliceScheduler;

SliceScheduler make_busy_gpu(int instances, bool with_caps, double allocated = 0.999999) {
  Result<SliceScheduler> created = SliceScheduler::create(Config{}, 0);
  if (!created.ok()) std::abort();
  SliceScheduler scheduler = std::move(created.value());
  // Uneven targets summing to 1, so orderings are not trivial.
  std::vector<double> weights;
  double total = 0.0;
  for (int i = 0; i < instances; ++i) {
    weights.push_back(1.0 + (i % 7));
    total += weights.back();
  }
  for (int i = 0; i < instances; ++i) {
    const auto id = static_cast<InstanceId>(i + 1);
    const Mode mode = with_caps && i % 4 == 0 ? Mode::kCap : Mode::kBurst;
    if (!scheduler.join(id, weights[static_cast<std::size_t>(i)] / total * allocated, mode, 0)
             .ok() ||
        !scheduler.set_asking(id, true, 0).ok()) {
      std::abort();
    }
  }
  return scheduler;
}

void run_decisions(benchmark::State& state, bool with_caps, double allocated = 0.999999) {
  SliceScheduler scheduler = make_busy_gpu(static_cast<int>(state.range(0)), with_caps, allocated);
  Nanos now = 0;
  auto grant = scheduler.decide(now);
  // Warm up past the start so the orderings are in their steady state.
  for (int i = 0; i < 2000; ++i) {
    now = grant.until;
    if (grant.holder && !scheduler.charge(*grant.holder, 10 * kMillisecond, now).ok()) std::abort();
    grant = scheduler.decide(now);
  }
  for (auto _ : state) {
    now = grant.until;
    if (grant.holder && !scheduler.charge(*grant.holder, 10 * kMillisecond, now).ok()) std::abort();
    grant = scheduler.decide(now);
    benchmark::DoNotOptimize(grant);
  }
  state.SetLabel("charge + decide() picking the next holder");
}

void BM_DecisionBurst(benchmark::State& state) {
  run_decisions(state, false);
}
void BM_DecisionQuarterCap(benchmark::State& state) {
  run_decisions(state, true);
}
// Half the GPU allocated: waits stay far from their bounds, so every decision
// runs the full anti-starvation check (the fully allocated runs above often
// find someone already due and skip it).
void BM_DecisionHalfAllocated(benchmark::State& state) {
  run_decisions(state, false, 0.5);
}

// The agent's periodic check in the middle of a slice: nothing changes.
void BM_PollMidSlice(benchmark::State& state) {
  SliceScheduler scheduler = make_busy_gpu(static_cast<int>(state.range(0)), false);
  const auto grant = scheduler.decide(0);
  const Nanos now = grant.until / 2;
  for (auto _ : state)
    benchmark::DoNotOptimize(scheduler.decide(now));
}

BENCHMARK(BM_DecisionBurst)->Arg(2)->Arg(16)->Arg(128);
BENCHMARK(BM_DecisionQuarterCap)->Arg(2)->Arg(16)->Arg(128);
BENCHMARK(BM_DecisionHalfAllocated)->Arg(2)->Arg(16)->Arg(128);
BENCHMARK(BM_PollMidSlice)->Arg(2)->Arg(16)->Arg(128);

}  // namespace

BENCHMARK_MAIN();
