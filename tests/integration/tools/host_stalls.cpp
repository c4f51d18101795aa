// egpu-host-stalls: makes this machine stall the way a busy VM host does, to
// check that timing-sensitive tests stand up to it. On every CPU a SCHED_FIFO
// thread (priority 2, above the harness's StallMonitor) spins for 5-30 ms at
// exponentially distributed gaps; all CPUs share one seeded schedule, so the
// stalls are whole-machine ones (as when a host deschedules the VM). Root only.
//
//   egpu-host-stalls SECONDS [MEAN_GAP_MS=500]
//   e.g. build/tests/integration/egpu-host-stalls 170 500 &
//        ctest --test-dir build -R 'enforce\.(Precision|Behaviour)'
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "realtime_thread.h"

namespace {

long long monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

void stall_cpu(int cpu, long long end_ns, double mean_gap_ms) {
  if (const int rc = egpu::harness::pin_realtime(cpu, 2); rc != 0) {
    std::fprintf(stderr, "egpu-host-stalls: SCHED_FIFO on CPU %d: %s\n", cpu, std::strerror(rc));
    return;
  }
  std::mt19937 rng(1);  // the same schedule on every CPU
  std::exponential_distribution<double> gap_ms(1.0 / mean_gap_ms);
  std::uniform_real_distribution<double> stall_ms(5, 30);
  while (monotonic_ns() < end_ns) {
    const auto gap = static_cast<long long>(gap_ms(rng) * 1e6);
    const timespec nap{static_cast<time_t>(gap / 1'000'000'000), gap % 1'000'000'000};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, nullptr);
    const long long until = monotonic_ns() + static_cast<long long>(stall_ms(rng) * 1e6);
    while (monotonic_ns() < until) {
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  const double mean_gap_ms = argc > 2 ? std::atof(argv[2]) : 500;
  if (argc < 2 || argc > 3 || seconds <= 0 || mean_gap_ms < 1) {
    std::fprintf(stderr, "usage: egpu-host-stalls SECONDS [MEAN_GAP_MS>=1, default 500]\n");
    return 2;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) {
    std::fprintf(stderr, "egpu-host-stalls: sched_getaffinity: %s\n", std::strerror(errno));
    return 1;
  }
  const long long end_ns = monotonic_ns() + static_cast<long long>(seconds * 1e9);
  std::vector<std::thread> threads;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &cpus)) threads.emplace_back(stall_cpu, cpu, end_ns, mean_gap_ms);
  }
  for (std::thread& t : threads)
    t.join();
  return 0;
}
