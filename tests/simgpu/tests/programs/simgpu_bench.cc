// simgpu_bench: prints what simgpu's driver calls cost on the host (run with
// LD_LIBRARY_PATH=$SIMGPU_LIB_DIR and a private SIMGPU_SHM). Figures only,
// nothing is asserted.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "check.h"

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

template <class Body>
void per_call(const char* what, int n, Body&& body) {
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i)
    body();
  std::printf("%-44s %10.0f ns/call  (%d calls)\n", what, ns_since(start) / n, n);
}

}  // namespace

int main() {
  SIMGPU_CHECK(cuInit(0));
  CUcontext ctx = nullptr;
  SIMGPU_CHECK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule module = nullptr;
  SIMGPU_CHECK(cuModuleLoadData(&module, kSimgpuTestPtx));
  CUfunction spin = nullptr;
  SIMGPU_CHECK(cuModuleGetFunction(&spin, module, "spin"));
  CUstream stream = nullptr;
  SIMGPU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent event = nullptr;
  SIMGPU_CHECK(cuEventCreate(&event, CU_EVENT_DEFAULT));

  unsigned long long zero = 0;
  void* zero_params[] = {&zero};
  per_call("cuLaunchKernel (0 ns kernel, idle device)", 200000, [&] {
    SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, zero_params, nullptr));
  });
  per_call("cuEventRecord (idle device)", 100000,
           [&] { SIMGPU_CHECK(cuEventRecord(event, stream)); });

  // Host-side latency of launch + synchronize of a 1 ms kernel, alone.
  unsigned long long one_ms = 1'000'000;
  void* one_ms_params[] = {&one_ms};
  std::vector<double> overshoot_us;
  for (int i = 0; i < 300; ++i) {
    const auto start = Clock::now();
    SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, one_ms_params, nullptr));
    SIMGPU_CHECK(cuStreamSynchronize(stream));
    overshoot_us.push_back(ns_since(start) / 1000.0 - 1000.0);
  }
  std::sort(overshoot_us.begin(), overshoot_us.end());
  std::printf("%-44s median %.1f us, p90 %.1f us, p99 %.1f us\n",
              "launch+sync of 1 ms kernel, beyond 1 ms", overshoot_us[150], overshoot_us[270],
              overshoot_us[297]);

  unsigned long long long_ns = 10'000'000'000ull;
  void* long_params[] = {&long_ns};
  SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, long_params, nullptr));
  unsigned long long tiny = 1000;
  void* tiny_params[] = {&tiny};
  per_call("cuLaunchKernel (queueing behind a busy device)", 1000, [&] {
    SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, tiny_params, nullptr));
  });
  per_call("cuStreamQuery (busy)", 100000, [&] { cuStreamQuery(stream); });
  per_call("cuEventQuery (never recorded)", 100000, [&] { cuEventQuery(event); });
  size_t free_bytes = 0;
  size_t total = 0;
  per_call("cuMemGetInfo", 20000, [&] { SIMGPU_CHECK(cuMemGetInfo(&free_bytes, &total)); });
  CUdeviceptr p = 0;
  per_call("cuMemAlloc + cuMemFree (1 MiB)", 20000, [&] {
    SIMGPU_CHECK(cuMemAlloc(&p, 1 << 20));
    SIMGPU_CHECK(cuMemFree(p));
  });
  return 0;  // exit drops the queued 10 s kernel, as a real teardown would
}
