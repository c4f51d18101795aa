#include "spin_kernel.h"

#include <cmath>

#include "cuda_check.h"

namespace egpu::workload {

SpinKernel::SpinKernel(CUfunction function, CUstream stream, double iters_per_ns)
    : function_(function), stream_(stream), iters_per_ns_(iters_per_ns) {}

std::uint64_t SpinKernel::iterations_for(std::uint64_t ns) const {
  return static_cast<std::uint64_t>(std::llround(static_cast<double>(ns) * iters_per_ns_));
}

void SpinKernel::launch(std::uint64_t ns) const {
  launch_raw(ns, iterations_for(ns));
}

void SpinKernel::launch_raw(std::uint64_t ns, std::uint64_t iterations) const {
  // The kernel's parameters are two unsigned long long: duration, iterations.
  unsigned long long duration_param = ns;
  unsigned long long iterations_param = iterations;
  void* params[] = {&duration_param, &iterations_param};
  cuda_check(cuLaunchKernel(function_, 1, 1, 1, kThreads, 1, 1, 0, stream_, params, nullptr),
             "cuLaunchKernel");
}

}  // namespace egpu::workload
