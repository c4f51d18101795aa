// Launches the spin kernel for a declared device time: `ns` drives the
// simulated driver, `ns * iters_per_ns` loop iterations drive a real GPU.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace egpu::workload {

class SpinKernel {
 public:
  // One warp: the loop is latency-bound, so more threads would not change its
  // duration, and a single block keeps the kernel on one SM like a small kernel.
  static constexpr unsigned kThreads = 32;

  SpinKernel(CUfunction function, CUstream stream, double iters_per_ns);

  // Enqueues one kernel of `ns` declared device time (0 is a valid, empty kernel).
  void launch(std::uint64_t ns) const;
  // Enqueues one kernel of explicit parameters (calibration uses it).
  void launch_raw(std::uint64_t ns, std::uint64_t iterations) const;
  // The same kernel through the pre-CUDA-4 API (cuParamSetv, cuFuncSetBlockShape,
  // cuLaunchGridAsync), which a job may still call (spin_kernel_legacy.cpp).
  void launch_legacy(std::uint64_t ns) const;

  std::uint64_t iterations_for(std::uint64_t ns) const;
  double iters_per_ns() const { return iters_per_ns_; }

 private:
  CUfunction function_;
  CUstream stream_;
  double iters_per_ns_;
};

}  // namespace egpu::workload
