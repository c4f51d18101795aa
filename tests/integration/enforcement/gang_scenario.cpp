#include "gang_scenario.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "enforced_node.h"

namespace egpu::integration {
namespace {

// A small iteration (8 x 500 us of compute, a 500 us all-reduce): many
// iterations per window, so the rate is measured to a few percent.
const std::vector<std::string> kRankArgs{
    "--compute-kernels", "8", "--compute-us", "500", "--allreduce-us", "500", "--cpu-us", "100",
    "--ranks",           "2", "--comm",       "7",   "--progress"};

struct Progress {
  double t = 0;
  uint64_t iterations = 0;
};

// The last progress line ("... t=12.3s iterations=456") a rank printed.
std::optional<Progress> last_progress(const std::string& text) {
  std::optional<Progress> last;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto t = line.find(" t=");
    const auto it = line.find(" iterations=");
    if (t == std::string::npos || it == std::string::npos) continue;
    last = Progress{std::stod(line.substr(t + 3)), std::stoull(line.substr(it + 12))};
  }
  return last;
}

}  // namespace

GangRun run_gang_step(const GangSetup& setup) {
  NodeOptions options;
  options.gpus = 2;
  if (setup.gang) options.agent_config = "GangPeriodMs=20\n";
  EnforcedNode node(setup.gang ? "gang" : "gang-off", options);
  for (uint32_t gpu = 0; gpu < 2; ++gpu) {
    node.create(1, setup.rank_units, "burst", gpu);
    if (setup.cotenants) node.create(2 + gpu, 100 - setup.rank_units, "burst", gpu);
  }
  std::vector<std::unique_ptr<test_child::ChildProcess>> ranks;
  std::vector<std::unique_ptr<test_child::ChildProcess>> others;
  std::vector<std::string> labels;
  for (uint32_t gpu = 0; gpu < 2; ++gpu) {
    harness::WorkloadOptions rank{"ddp-like", kRankArgs, "rank" + std::to_string(gpu), {}};
    rank.stderr_mode = test_child::OutputMode::kCapture;
    ranks.push_back(node.start(1, rank, gpu));
    labels.push_back(rank.label);
    if (setup.cotenants) {
      others.push_back(node.start(2 + gpu, greedy("cotenant" + std::to_string(gpu)), gpu));
      labels.push_back("cotenant" + std::to_string(gpu));
    }
  }
  GangRun run;
  harness::ShareSampler sampler(node.source(), std::chrono::milliseconds(50));
  if (!sampler.wait_until(harness::labels_busy(labels), std::chrono::seconds(20))) {
    ADD_FAILURE() << "the workloads did not all start";
  } else {
    std::this_thread::sleep_for(setup.warmup);
    const auto from = std::chrono::steady_clock::now();
    const auto first = last_progress(ranks[0]->stderr_text());
    std::this_thread::sleep_for(setup.measure);
    const auto last = last_progress(ranks[0]->stderr_text());
    const auto to = std::chrono::steady_clock::now();
    sampler.stop();
    if (first && last && last->t > first->t) {
      run.iterations_per_s =
          static_cast<double>(last->iterations - first->iterations) / (last->t - first->t);
      run.ok = true;
    } else {
      ADD_FAILURE() << "rank 0 printed no progress to measure:\n" << ranks[0]->stderr_text();
    }
    run.cotenant_share = setup.cotenants ? 1.0 : 0.0;
    const double target = (100 - setup.rank_units) / 100.0;
    for (int gpu = 0; setup.cotenants && gpu < 2; ++gpu) {
      const std::string label = "cotenant" + std::to_string(gpu);
      const harness::ShareReport report =
          harness::compute_shares(harness::samples_between(sampler.samples(), from, to), gpu,
                                  harness::GroupBy::kLabel, std::chrono::milliseconds(500));
      run.cotenant_share = std::min(run.cotenant_share, report.share(label));
      for (const harness::Shares& w : report.windows) {
        const auto s = w.find(label);
        const double below = target - (s == w.end() ? 0.0 : s->second);
        run.cotenant_worst_window_pp = std::max(run.cotenant_worst_window_pp, below * 100.0);
      }
    }
  }
  // A rank stopped alone would wait for its peer's all-reduce for ever: kill.
  for (auto& r : ranks)
    r->kill(SIGKILL);
  for (auto& r : ranks)
    (void)r->wait_for(std::chrono::seconds(10));
  for (auto& o : others)
    (void)stop(*o);
  return run;
}

double gang_iteration_ratio(const GangRun& shared, const GangRun& alone, uint32_t rank_units) {
  if (alone.iterations_per_s <= 0) return 0;
  return shared.iterations_per_s / (alone.iterations_per_s * rank_units / 100.0);
}

}  // namespace egpu::integration
