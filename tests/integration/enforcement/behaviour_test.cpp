// Enforcement behaviours beyond steady shares: sync-heavy processes, latency,
// deep queues, runtime resize, cap and burst alone.
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "enforced_node.h"
#include "latency_stats.h"
#include "scenarios.h"
#include "stall_monitor.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;

// `seconds` 0: until the test stops it (stop()).
harness::WorkloadOptions workload(const std::string& program, const std::string& label,
                                  double seconds, std::vector<std::string> args = {}) {
  for (const std::string& a : {std::string("--duration-s"), std::to_string(seconds),
                               std::string("--iters-per-us"), std::string("1")}) {
    args.push_back(a);
  }
  return harness::WorkloadOptions{program, args, label, {}};
}

TEST(Behaviour, SyncEveryKernelGetsItsHalfAgainstGreedy) {
  EnforcedNode node("sync50");
  node.create(1, 50);
  node.create(2, 50);
  auto sync =
      node.start(1, workload("greedy", "sync", 0, {"--sync-every", "1", "--kernel-us", "1000"}));
  auto greedy = node.start(2, workload("greedy", "greedy", 0));
  const auto wall = measure_shares(node, {"sync", "greedy"}, 1500ms, 5000ms);
  const auto [report, used] = harness::split_of_used_time(wall);
  std::printf("GPU %.1f%% busy\n%s", used * 100,
              harness::format_report(report, {{"sync", 0.5}, {"greedy", 0.5}}).c_str());
  // Between a sync's return and its next launch the GPU idles while the
  // sync job holds it: microseconds on a quiet host (then each ran half of
  // the time, 0.50 +- 0.02, with the GPU busy 85 % or more), milliseconds
  // where the host is busy and its thread waits for a CPU. Those gaps are
  // the sync job's time: it held the GPU for them. So on any host the
  // greedy job runs its half of the wall time, and the sync job's half is
  // what it ran plus the GPU's idle time (its gaps, and the handovers).
  const double greedy_ran = report.share("greedy") * used;
  const double sync_ran = report.share("sync") * used;
  EXPECT_NEAR(greedy_ran, 0.50, 0.03);
  EXPECT_GE(sync_ran + (1.0 - used), 0.47);
  EXPECT_LE(sync_ran, 0.53);
  EXPECT_GT(sync_ran, 0.0);
  stop(*sync);
  stop(*greedy);
}

// Latencies of requests that a stall of the machine did not touch.
struct LatencySamples {
  std::vector<double> kept_ms;
  size_t left_out = 0;
};

// p99 of an inference-like service at 30% beside a greedy job at 70% stays
// within its p99 alone + 3 ms. 50 requests/s of 2 ms use a third of its share;
// at 100/s (two thirds) Poisson clusters ask for more than 30% for tens of ms,
// FAA rightly holds them to the share, and the tail is the share's, not the
// scheduler's.
// These 2-core VMs lose their CPUs for 5-80 ms, several times a minute in bad
// spells (a sleeper beside this test saw 42 such stalls in 45 s): a p99 taken
// across them measures the host. A StallMonitor records them; requests they
// touched, or that began within a slice after one (FAA then hands the GPU to
// the job that waited through it), are left out of both sides and counted.
// Alone and shared runs alternate so both see the same spells.
TEST(Behaviour, InferenceLatencyBesideGreedyStaysNearAlone) {
  constexpr int kRounds = 3;
  constexpr double kSeconds = 6;
  constexpr auto kAftermath = std::chrono::milliseconds(10);  // the default slice
  const std::vector<std::string> args = {
      "--rate", "50", "--kernels-per-request", "4", "--kernel-us", "500", "--samples"};
  harness::StallMonitor monitor(std::chrono::milliseconds(2));
  std::vector<nlohmann::json> alone_runs;
  std::vector<nlohmann::json> shared_runs;
  for (int round = 0; round < kRounds; ++round) {
    {
      EnforcedNode node("lat-alone");
      node.create(1, 30);
      auto inf = node.start(1, workload("inference-like", "alone", kSeconds, args));
      alone_runs.push_back(finish(*inf));
    }
    EnforcedNode node("lat-shared");
    node.create(1, 30);
    node.create(2, 70);
    auto greedy = node.start(2, workload("greedy", "greedy", 0));
    std::this_thread::sleep_for(500ms);
    auto inf = node.start(1, workload("inference-like", "shared", kSeconds, args));
    shared_runs.push_back(finish(*inf));
    stop(*greedy);
  }
  const std::vector<harness::Stall> stalls = monitor.stalls();
  const auto keep = [&stalls, kAftermath](const std::vector<nlohmann::json>& runs) {
    LatencySamples out;
    for (const nlohmann::json& run : runs) {
      const auto latency = run.value("latency_samples_ms", std::vector<double>{});
      const auto arrival = run.value("arrival_samples_s", std::vector<double>{});
      EXPECT_EQ(latency.size(), arrival.size());
      EXPECT_GT(latency.size(), 200u) << run.dump();
      for (size_t i = 0; i < std::min(latency.size(), arrival.size()); ++i) {
        const std::chrono::steady_clock::time_point from(
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(arrival[i])));
        const auto to = from + std::chrono::microseconds(static_cast<int64_t>(latency[i] * 1e3));
        if (harness::overlaps_stall(from, to, stalls, kAftermath)) {
          ++out.left_out;
        } else {
          out.kept_ms.push_back(latency[i]);
        }
      }
    }
    return out;
  };
  const LatencySamples alone = keep(alone_runs);
  const LatencySamples shared = keep(shared_runs);
  const workload::Percentiles a = workload::compute_percentiles(alone.kept_ms);
  const workload::Percentiles s = workload::compute_percentiles(shared.kept_ms);
  std::printf(
      "inference latency over %d rounds (ms); %zu machine stalls over 2 ms (monitor %s)\n"
      "  alone:         p50 %.2f p90 %.2f p99 %.2f max %.2f (%zu requests, %zu left out)\n"
      "  beside greedy: p50 %.2f p90 %.2f p99 %.2f max %.2f (%zu requests, %zu left out)\n",
      kRounds, stalls.size(), monitor.realtime() ? "SCHED_FIFO" : "normal priority", a.p50, a.p90,
      a.p99, a.max, a.count, alone.left_out, s.p50, s.p90, s.p99, s.max, s.count, shared.left_out);
  // With most requests touched by stalls, what is left says nothing.
  for (const LatencySamples* side : {&alone, &shared}) {
    EXPECT_LT(side->left_out * 3, side->left_out + side->kept_ms.size())
        << "the machine stalled too often to measure latency";
  }
  EXPECT_GT(a.p99, 2.0);  // a request is 2 ms of device work
  EXPECT_LE(s.p99, a.p99 + 3.0);
}

TEST(Behaviour, DeepQueueGetsNoMoreThanItsShare) {
  EnforcedNode node("queue");
  node.create(1, 30);
  node.create(2, 70);
  auto ml = node.start(1, workload("ml-like", "ml-deep", 0, {"--queue-ahead", "16"}));
  auto greedy = node.start(2, workload("greedy", "greedy", 0));
  auto report = measure_shares(node, {"ml-deep", "greedy"}, 1500ms, 5000ms);
  std::printf("%s", harness::format_report(report, {{"ml-deep", 0.3}, {"greedy", 0.7}}).c_str());
  EXPECT_LE(report.share("ml-deep"), 0.32);
  EXPECT_GE(report.share("ml-deep"), 0.27);
  stop(*ml);
  stop(*greedy);
}

// A training loop whose few long matrix products hide among many short
// kernels: a handover that trusted the per-launch average started the next
// job beside a product still running, and both were charged the overlap (on
// simgpu as on the H200: 121% of wall charged, 55/45 instead of 50/50). The
// agent now follows the old holder's own report of its draining tail.
// Each member of the scenario's run was charged what it used (within 3 pp
// of wall time) and got its share.
void expect_charged_what_each_used(const Scenario& c, const ScenarioRun& run) {
  std::printf("%s (GPU %.1f%% busy):\n%s", c.name.c_str(), run.utilisation * 100,
              harness::format_report(run.report, run.targets).c_str());
  ASSERT_EQ(run.agent_charged.size(), c.members.size()) << "agent status unreadable";
  for (const ScenarioMember& m : c.members) {
    const double truth = run.wall.share(m.label);
    const double charged = run.agent_charged.at(m.label);
    std::printf("  %-8s charged %.1f%% of wall, used %.1f%%\n", m.label.c_str(), charged * 100,
                truth * 100);
    EXPECT_NEAR(charged * 100, truth * 100, 3.0) << m.label << ": charged is not what it used";
    EXPECT_NEAR(run.report.share(m.label) * 100, m.units, c.whole_tolerance_pp) << m.label;
  }
}

TEST(Behaviour, GemmHeavyTrainingIsChargedWhatItUsesAndGetsItsHalf) {
  const Scenario& c = gemm_training_scenario();
  const ScenarioRun run = run_scenario(c, ScenarioTiming{});
  expect_charged_what_each_used(c, run);
  EXPECT_GE(run.utilisation, 0.85);
}

// CUDA graphs: capture runs unchanged under the shim (captured launches are
// neither gated nor paced: they run nothing), and each cuGraphLaunch is gated
// and charged the device time of the work it replays.
TEST(Behaviour, GraphReplayIsGatedAndChargedWhatItUses) {
  const Scenario& c = graph_training_scenario();
  const ScenarioRun run = run_scenario(c, ScenarioTiming{});
  ASSERT_FALSE(run.summaries.empty());
  EXPECT_TRUE(run.summaries[0].value("graph", false)) << run.summaries[0].dump();
  EXPECT_GT(run.summaries[0].value("iterations", 0), 0) << run.summaries[0].dump();
  expect_charged_what_each_used(c, run);
  EXPECT_GE(run.utilisation, 0.8);  // its CPU phases idle the GPU while it holds the slice
}

// Memsets queue device work like kernels (a GPU may run them on its SMs):
// a job that only sets memory waits at the gate and is charged what it used,
// instead of running beside every slice holder on nobody's account.
TEST(Behaviour, MemsetsAreGatedAndChargedLikeKernels) {
  const Scenario& c = memset_scenario();
  const ScenarioRun run = run_scenario(c, ScenarioTiming{});
  expect_charged_what_each_used(c, run);
  EXPECT_GE(run.utilisation, 0.85);
}

// The pre-CUDA-4 launches (cuParamSet*, cuLaunchGridAsync) are still in every
// driver: a job launching only through them is gated and charged like any other.
TEST(Behaviour, LegacyLaunchesAreGatedAndChargedLikeKernels) {
  const Scenario& c = legacy_launch_scenario();
  const ScenarioRun run = run_scenario(c, ScenarioTiming{});
  ASSERT_FALSE(run.summaries.empty());
  EXPECT_TRUE(run.summaries[0].value("legacy_launch", false)) << run.summaries[0].dump();
  expect_charged_what_each_used(c, run);
  EXPECT_GE(run.utilisation, 0.85);
}

TEST(Behaviour, RuntimeResizeWithEgpuctlTakesEffectWithinASecond) {
  EnforcedNode node("resize");
  const uint64_t a = node.create(1, 70);
  const uint64_t b = node.create(2, 30);
  auto wa = node.start(1, workload("greedy", "a", 0));
  auto wb = node.start(2, workload("greedy", "b", 0));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"a", "b"}), 20s));
  std::this_thread::sleep_for(2500ms);
  const auto before_from = std::chrono::steady_clock::now() - 1500ms;
  const auto requested_at = std::chrono::steady_clock::now();
  // Shrinks go before grows: egpuctl orders them. Two jobs trade units:
  // root, past what Slurm granted job 2, so forced.
  auto ctl =
      node.egpuctl({"resize", "--force", std::to_string(a) + "=30", std::to_string(b) + "=70"});
  ASSERT_EQ(ctl.code, 0) << ctl.out << ctl.err;
  // Applied by the time egpuctl has the agent's answer (starting egpuctl
  // may take a busy host longer than the second measured).
  const auto resized_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3000ms);
  sampler.stop();
  const auto samples = sampler.samples();
  // Shares of the device time used (handover gaps are nobody's).
  const auto before =
      harness::split_of_used_time(
          harness::compute_shares(harness::samples_between(samples, before_from, requested_at), 0,
                                  harness::GroupBy::kLabel, 500ms))
          .split;
  const auto after =
      harness::split_of_used_time(
          harness::compute_shares(
              harness::samples_between(samples, resized_at + 1000ms, resized_at + 3000ms), 0,
              harness::GroupBy::kLabel, 500ms))
          .split;
  std::printf("before:\n%safter (from 1 s after the resize):\n%s",
              harness::format_report(before).c_str(),
              harness::format_report(after, {{"a", 0.3}, {"b", 0.7}}).c_str());
  EXPECT_NEAR(before.share("a"), 0.70, 0.02);
  EXPECT_NEAR(after.share("a"), 0.30, 0.02);
  EXPECT_NEAR(after.share("b"), 0.70, 0.02);
  // Nothing restarted: the same processes run on.
  EXPECT_TRUE(wa->running());
  EXPECT_TRUE(wb->running());
  stop(*wa);
  stop(*wb);
}

TEST(Behaviour, CapAloneStaysAtItsShare) {
  EnforcedNode node("cap-alone");
  node.create(1, 30, "cap");
  auto w = node.start(1, workload("greedy", "capped", 0));
  auto report = measure_shares(node, {"capped"}, 1000ms, 5000ms);
  std::printf("%s", harness::format_report(report, {{"capped", 0.3}}).c_str());
  EXPECT_LE(report.share("capped"), 0.32);
  EXPECT_GE(report.share("capped"), 0.27);
  stop(*w);
}

TEST(Behaviour, BurstAloneUsesTheWholeGpu) {
  EnforcedNode node("burst-alone");
  node.create(1, 30, "burst");
  auto w = node.start(1, workload("greedy", "burst", 0));
  auto report = measure_shares(node, {"burst"}, 1000ms, 5000ms);
  std::printf("%s", harness::format_report(report).c_str());
  EXPECT_GE(report.share("burst"), 0.95);
  stop(*w);
}

}  // namespace
}  // namespace egpu::integration
