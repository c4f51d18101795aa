// A data-parallel step (two ranks on two GPUs, compute then an all-reduce
// per iteration) beside greedy co-tenants, replayed in simulated time: with
// gang windows its ranks hold their GPUs together and it reaches the
// iteration rate its share allows; sliced independently, its collectives
// wait for the other rank's next slice, spinning on their own share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/faa/gang_window.h"
#include "replay/policy_replay.h"

namespace egpu::faa::replay {
namespace {

constexpr Nanos kMs = kMillisecond;
constexpr Nanos kUs = kMicrosecond;
constexpr Nanos kWarmup = 1000 * kMs;
constexpr Nanos kRun = 5000 * kMs;
constexpr Nanos kWindow = 500 * kMs;  // shares are judged per window (DESIGN.md)

ReplayOptions agent_defaults() {
  ReplayOptions o;
  o.settings.faa.slice = 10 * kMs;
  o.settings.faa.tau = 250 * kMs;
  o.settings.inflight_limit_ns = 2 * kMs;
  o.settings.inflight_alone_ns = 20 * kMs;
  return o;
}

struct DdpShape {
  Nanos compute = kMs;   // per kernel
  uint64_t kernels = 4;  // per iteration
  Nanos allreduce = 500 * kUs;
};

ProcessScript ddp_rank(uint32_t gpu, double share, const DdpShape& shape,
                       std::optional<GangWindow> gang) {
  ProcessScript s;
  s.target = share;
  s.gpu = gpu;
  s.comm = 0;
  s.gang = gang;
  s.steps = {Step::kernels(shape.compute, shape.kernels), Step::collective(shape.allreduce)};
  s.repeat = true;
  return s;
}

ProcessScript greedy(uint32_t gpu, double share, Nanos kernel, Nanos start) {
  ProcessScript s;
  s.target = share;
  s.gpu = gpu;
  s.start = start;
  s.steps = {Step::kernels(kernel)};
  return s;
}

double iterations_per_second(const PolicyReplay& r, std::size_t rank) {
  const double n = static_cast<double>(r.collectives_done(rank, kWarmup, kRun));
  return n / (static_cast<double>(kRun - kWarmup) / 1e9);
}

// The rate of the step alone on two whole GPUs.
double alone_rate(const DdpShape& shape) {
  PolicyReplay r(agent_defaults(),
                 {ddp_rank(0, 0.5, shape, std::nullopt), ddp_rank(1, 0.5, shape, std::nullopt)});
  r.run_until(kRun);
  return iterations_per_second(r, 0);
}

struct Outcome {
  double ratio = 0;              // iteration rate / (alone rate x share)
  double worst_cotenant_pp = 0;  // co-tenants' worst window below their share
};

// Ranks at `share` on GPUs 0 and 1, each beside a greedy co-tenant taking
// the rest (different kernel lengths and start times, so the two GPUs'
// schedules are not the same by accident). `skew` shifts rank 1's clock:
// the ranks are on two nodes, each deciding alone whether it holds a window.
Outcome run_step(const DdpShape& shape, double share, bool gang, Nanos skew,
                 Nanos cotenant_kernel0 = 700 * kUs, Nanos cotenant_kernel1 = 1300 * kUs) {
  std::optional<GangWindow> w0;
  std::optional<GangWindow> w1;
  ReplayOptions options = agent_defaults();
  if (gang) {
    w0 = GangWindow{0, kDefaultGangPeriod, 0, window_length(share, kDefaultGangPeriod)};
    w0->across_nodes = skew != 0;
    options.one_node = skew == 0;
    w1 = w0;
    w1->epoch += skew;
  }
  PolicyReplay r(options, {ddp_rank(0, share, shape, w0), ddp_rank(1, share, shape, w1),
                           greedy(0, 1 - share, cotenant_kernel0, 0),
                           greedy(1, 1 - share, cotenant_kernel1, 3 * kMs + 170 * kUs)});
  r.run_until(kRun);
  Outcome o;
  o.ratio = iterations_per_second(r, 0) / (alone_rate(shape) * share);
  for (std::size_t c = 2; c < 4; ++c) {
    for (Nanos t = kWarmup; t + kWindow <= kRun; t += kWindow) {
      const double below = (1 - share) - r.share(c, t, t + kWindow);
      o.worst_cotenant_pp = std::max(o.worst_cotenant_pp, below * 100);
    }
  }
  return o;
}

TEST(GangReplay, GangReachesTheRateItsShareAllowsAndCotenantsKeepTheirs) {
  const DdpShape shape;
  const Outcome gang = run_step(shape, 0.5, true, 0);
  const Outcome independent = run_step(shape, 0.5, false, 0);
  std::printf("gang: iteration ratio %.3f, co-tenant worst window %.2f pp below\n", gang.ratio,
              gang.worst_cotenant_pp);
  std::printf("independent: iteration ratio %.3f, co-tenant worst window %.2f pp below\n",
              independent.ratio, independent.worst_cotenant_pp);
  EXPECT_GE(gang.ratio, 0.9);
  EXPECT_LE(gang.worst_cotenant_pp, 2.5);
  // What gangs are for: sliced on their own, the ranks wait for each other.
  EXPECT_LT(independent.ratio, gang.ratio - 0.1);
}

TEST(GangReplay, OtherSharesAndShapes) {
  for (const double share : {0.3, 0.7}) {
    for (const DdpShape shape :
         {DdpShape{}, DdpShape{300 * kUs, 10, 200 * kUs}, DdpShape{2 * kMs, 2, kMs}}) {
      const Outcome o = run_step(shape, share, true, 0);
      std::printf("share %.1f, %lld us x %llu + %lld us: ratio %.3f, co-tenant %.2f pp below\n",
                  share, static_cast<long long>(shape.compute / kUs),
                  static_cast<unsigned long long>(shape.kernels),
                  static_cast<long long>(shape.allreduce / kUs), o.ratio, o.worst_cotenant_pp);
      EXPECT_GE(o.ratio, 0.9) << "share " << share << " compute " << shape.compute;
      // A kernel launched on an empty queue is never held back (the gate
      // cannot know its length), so one as long as the in-flight bound
      // overruns a window's end by up to its length: the long-kernel limit
      // (README, Known limits).
      const double bar = shape.compute >= 2 * kMs ? 5.0 : 2.5;
      EXPECT_LE(o.worst_cotenant_pp, bar) << "share " << share << " compute " << shape.compute;
    }
  }
}

TEST(GangReplay, ClockSkewWithinToleranceCostsLittleBeyondItMuch) {
  const DdpShape shape;
  const Outcome within = run_step(shape, 0.5, true, kDefaultAlignTolerance);
  const Outcome beyond = run_step(shape, 0.5, true, 4 * kMs);
  std::printf("skew %lld us: ratio %.3f; skew 4 ms: ratio %.3f\n",
              static_cast<long long>(kDefaultAlignTolerance / kUs), within.ratio, beyond.ratio);
  std::printf("co-tenants: %.2f pp below within, %.2f pp below beyond\n", within.worst_cotenant_pp,
              beyond.worst_cotenant_pp);
  // A rank whose window opens early spins in its collective until its
  // skewed peer's opens, holding its GPU: within the tolerance the step
  // loses a little and co-tenants up to the skew at each end of a window...
  EXPECT_GE(within.ratio, 0.8);
  EXPECT_LE(within.worst_cotenant_pp, 2 * 100.0 * kDefaultAlignTolerance / kDefaultGangPeriod);
  // ...beyond it the step loses most of its rate, which is why the agent
  // reports a clock worse than the tolerance. Co-tenants are kept
  // near their share even then: a rank charged for its spinning gets ahead
  // of its share and its gang loses windows (GangGrants).
  EXPECT_LT(beyond.ratio, within.ratio - 0.2);
  EXPECT_LE(beyond.worst_cotenant_pp, 7.5);
}

// A rank that launches a kernel longer than its window at every window's
// start takes the co-tenant's time after it (the gate cannot stop a running
// kernel); FAA charges it, and the windows it is too far ahead for are
// skipped, so the co-tenant keeps its share.
TEST(GangReplay, KernelsLongerThanTheWindowDoNotStarveCotenants) {
  ProcessScript hog;
  hog.target = 0.5;
  hog.gang = GangWindow{0, kDefaultGangPeriod, 0, window_length(0.5, kDefaultGangPeriod)};
  hog.steps = {Step::kernels(15 * kMs)};
  PolicyReplay r(agent_defaults(), {hog, greedy(0, 0.5, kMs, 0)});
  r.run_until(kRun);
  double worst = 0;
  for (Nanos t = kWarmup; t + kWindow <= kRun; t += kWindow)
    worst = std::max(worst, (0.5 - r.share(1, t, t + kWindow)) * 100);
  std::printf("co-tenant of a 15 ms-kernel rank: %.3f of the GPU, worst window %.2f pp below\n",
              r.share(1, kWarmup, kRun), worst);
  EXPECT_GE(r.share(1, kWarmup, kRun), 0.45);
  EXPECT_LE(worst, 10.0);
}

// What a job can do to its neighbours with long kernels or lies, sliced
// with and without gang windows. Returns the share of the instance
// `watched` over the run, windows on (first) and off (second).
std::pair<double, double> with_and_without_windows(ProcessScript rank, ProcessScript cotenant,
                                                   std::size_t watched) {
  double shares[2] = {0, 0};
  for (const bool windows : {true, false}) {
    rank.gang.reset();
    if (windows) {
      rank.gang = GangWindow{0, kDefaultGangPeriod, 0, window_length(0.5, kDefaultGangPeriod)};
    }
    PolicyReplay r(agent_defaults(), {rank, cotenant});
    r.run_until(kRun);
    shares[windows ? 0 : 1] = r.share(watched, kWarmup, kRun);
  }
  return {shares[0], shares[1]};
}

// A co-tenant whose 15 ms kernels run into the rank's windows gets ahead of
// its share, and then no longer keeps the rank out of the time between
// windows. A co-tenant that claims a long queue (a liar) does not hold off
// the rank's windows: they open without waiting for its claimed tail.
TEST(GangReplay, CotenantsLongKernelsOrLiesDoNotStarveAGangRank) {
  ProcessScript rank = greedy(0, 0.5, kMs, 0);
  for (const bool liar : {false, true}) {
    ProcessScript cotenant = greedy(0, 0.5, liar ? kMs : 15 * kMs, 0);
    cotenant.liar = liar;
    const auto [gang, alone] = with_and_without_windows(rank, cotenant, 0);
    std::printf("rank beside a %s co-tenant: %.3f of the GPU (%.3f without windows)\n",
                liar ? "lying" : "15 ms-kernel", gang, alone);
    // Its share, or what FAA alone gets it if less, to 6 pp.
    EXPECT_GE(gang, std::min(0.5, alone) - 0.06) << (liar ? "liar" : "long kernels");
  }
}

// A rank that lies (claims a queue, reports no device time) and launches
// 15 ms kernels is charged on the held-time floor for the windows it holds
// against its co-tenant and for the drains after them, gets ahead, and
// loses windows; but each window it still gets costs its co-tenant the
// overrun and a drain of its claimed tail. Its co-tenant keeps 0.42 of the
// GPU, against 0.60 without windows: this is why gangs are the site's
// choice (GangPeriodMs, off by default). The bound keeps it from getting
// worse unnoticed.
TEST(GangReplay, ALyingRankCostsItsCotenantABoundedPartOfItsShare) {
  ProcessScript liar = greedy(0, 0.5, 15 * kMs, 0);
  liar.liar = true;
  const auto [gang, alone] = with_and_without_windows(liar, greedy(0, 0.5, kMs, 0), 1);
  std::printf("co-tenant of a lying 15 ms-kernel rank: %.3f of the GPU (%.3f without windows)\n",
              gang, alone);
  EXPECT_GE(gang, 0.38);
  EXPECT_GE(alone, 0.5);
}

// A gang member that does not ask in its window leaves the GPU to the others.
TEST(GangReplay, AnIdleGangLeavesItsWindowToCotenants) {
  const GangWindow w{0, kDefaultGangPeriod, 0, window_length(0.5, kDefaultGangPeriod)};
  ProcessScript idle;
  idle.target = 0.5;
  idle.gang = w;
  idle.steps = {Step::idle(kRun)};
  PolicyReplay r(agent_defaults(), {idle, greedy(0, 0.5, kMs, 0)});
  r.run_until(kRun);
  EXPECT_GE(r.share(1, kWarmup, kRun), 0.99);
}

// A rank whose host thread the kernel deschedules now and then (a busy
// host: the case that failed the integration test under three CPU hogs)
// launches its part of a collective late; its peer's collective spins past
// the window's end into the co-tenant's time, and is charged for it. The
// gang then skips windows until FAA has given that time back, on both GPUs
// at once (GangGrants), so the limit on how far ahead a gang may run can be
// tight (at the old 5% limit, decided on each GPU, co-tenants kept 0.458
// and 0.442 of the GPU here, and lost up to 8 pp in a window). Decided on each GPU alone, the ranks
// skip at different times and fall out of step (OtherSharesAndShapes fails that way at this limit).
ProcessScript stalling_rank(uint32_t gpu, double share, std::optional<GangWindow> gang,
                            unsigned seed, Nanos max_stall) {
  ProcessScript s = ddp_rank(gpu, share, DdpShape{}, gang);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<Nanos> stall(100 * kUs, max_stall);
  s.steps.clear();
  for (int i = 0; i < 200; ++i) {
    if (rng() % 2 == 0) s.steps.push_back(Step::stall(stall(rng)));
    s.steps.push_back(Step::kernels(kMs, 4));
    s.steps.push_back(Step::collective(500 * kUs));
  }
  return s;
}

TEST(GangReplay, RanksDelayedByABusyHostCostCotenantsLittle) {
  const double share = 0.5;
  const GangWindow w{0, kDefaultGangPeriod, 0, window_length(share, kDefaultGangPeriod)};
  for (const Nanos max_stall : {2 * kMs, 5 * kMs}) {
    PolicyReplay r(agent_defaults(),
                   {stalling_rank(0, share, w, 1, max_stall),
                    stalling_rank(1, share, w, 2, max_stall), greedy(0, 1 - share, 700 * kUs, 0),
                    greedy(1, 1 - share, 1300 * kUs, 3 * kMs + 170 * kUs)});
    r.run_until(kRun);
    double cotenant = 1;
    double worst_pp = 0;
    for (std::size_t c = 2; c < 4; ++c) {
      cotenant = std::min(cotenant, r.share(c, kWarmup, kRun));
      for (Nanos t = kWarmup; t + kWindow <= kRun; t += kWindow)
        worst_pp = std::max(worst_pp, ((1 - share) - r.share(c, t, t + kWindow)) * 100);
    }
    std::printf(
        "stalls up to %lld us: %zu iterations, co-tenants %.3f, worst window %.2f pp below\n",
        static_cast<long long>(max_stall / kUs), r.collectives_done(0, kWarmup, kRun), cotenant,
        worst_pp);
    EXPECT_GE(cotenant, 0.47) << "stalls up to " << max_stall;
    EXPECT_LE(worst_pp, 6.0) << "stalls up to " << max_stall;
  }
}

}  // namespace
}  // namespace egpu::faa::replay
