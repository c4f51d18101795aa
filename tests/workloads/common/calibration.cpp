#include "calibration.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "cuda_handles.h"
#include "spin_kernel.h"

namespace egpu::workload {

namespace {

// Device milliseconds of one kernel of `iterations` loop steps and zero
// declared duration; the median of three.
double time_iterations(const GpuSession& session, const SpinKernel& spin,
                       std::uint64_t iterations) {
  Event start(true);
  Event end(true);
  std::array<double, 3> samples{};
  for (double& sample : samples) {
    start.record(session.stream());
    spin.launch_raw(0, iterations);
    end.record(session.stream());
    end.synchronize();
    sample = elapsed_ms(start, end);
  }
  std::sort(samples.begin(), samples.end());
  return samples[1];
}

}  // namespace

Calibration calibrate_spin(const GpuSession& session, double iters_per_us) {
  Calibration result;
  if (iters_per_us > 0) {
    result.iters_per_ns = iters_per_us / 1000.0;
    result.note = "given";
    return result;
  }
  const SpinKernel spin(session.spin_function(), session.stream(), 0);
  spin.launch_raw(0, 1000);  // warm-up: JIT and first-launch costs
  session.synchronize();

  // Grow the kernel until it runs >= 4 ms. Any GPU needs far more than 0.01 ms
  // for 16M dependent steps; if it does not, device time does not follow work.
  constexpr double kTargetMs = 4.0;
  constexpr std::uint64_t kProbeIterations = 1ULL << 24;
  constexpr std::uint64_t kMaxIterations = 1ULL << 40;
  std::uint64_t iterations = 1ULL << 14;
  double big_ms = time_iterations(session, spin, iterations);
  while (big_ms < kTargetMs && iterations < kMaxIterations) {
    if (iterations >= kProbeIterations && big_ms < 0.01) {
      result.work_scales = false;
      result.note = "device time does not depend on loop iterations (simulated driver)";
      return result;
    }
    iterations *= 4;
    big_ms = time_iterations(session, spin, iterations);
  }
  // The slope between a large and an eighth-size kernel cancels the fixed
  // launch cost, which every real kernel also pays.
  const double small_ms = time_iterations(session, spin, iterations / 8);
  const double slope_ms = big_ms - small_ms;
  if (slope_ms <= 0) {
    result.note = "calibration measured no growth with work; using 1 iteration/ns";
    return result;
  }
  result.iters_per_ns = static_cast<double>(iterations - iterations / 8) / (slope_ms * 1e6);
  result.measured = true;
  result.note = "measured";
  return result;
}

}  // namespace egpu::workload
