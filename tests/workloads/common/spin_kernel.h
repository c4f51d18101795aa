// Launches the spin kernel for a declared device time: `ns` drives the
// simulated driver, `ns * iters_per_ns` loop iterations drive a real GPU.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace egpu::workload {

class SpinKernel {
 public:
  SpinKernel(CUfunction function, CUstream stream, double iters_per_ns);

  // Enqueues one kernel of `ns` declared device time (0 is a valid, empty kernel).
  void launch(std::uint64_t ns) const;
  // Enqueues one kernel of explicit parameters (calibration uses it).
  void launch_raw(std::uint64_t ns, std::uint64_t iterations) const;

  std::uint64_t iterations_for(std::uint64_t ns) const;
  double iters_per_ns() const { return iters_per_ns_; }

 private:
  CUfunction function_;
  CUstream stream_;
  double iters_per_ns_;
};

}  // namespace egpu::workload
