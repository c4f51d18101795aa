// The pre-CUDA-4 launch path, deprecated in cuda.h but exported by every
// driver: a job that wants to get around an interposer tries it, so the
// tests launch through it too.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>

#include "cuda_check.h"
#include "spin_kernel.h"

namespace egpu::workload {

void SpinKernel::launch_legacy(std::uint64_t ns) const {
  // The kernel's parameters, as launch_raw's: duration, iterations.
  unsigned long long params[] = {ns, iterations_for(ns)};
  cuda_check(cuParamSetSize(function_, sizeof params), "cuParamSetSize");
  cuda_check(cuParamSetv(function_, 0, params, sizeof params), "cuParamSetv");
  cuda_check(cuFuncSetBlockShape(function_, kThreads, 1, 1), "cuFuncSetBlockShape");
  cuda_check(cuLaunchGridAsync(function_, 1, 1, stream_), "cuLaunchGridAsync");
}

}  // namespace egpu::workload
