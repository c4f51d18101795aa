// sim_busy --kernel-us N --seconds S [--mode greedy|sync] [--device D]
// Keeps a simulated GPU busy with kernels of N microseconds for S seconds of
// wall time: greedy launches without waiting (blocking only when the queue is
// full), sync synchronizes after every kernel. Prints "ready" after the first
// launch and "done launches=<n>" at the end.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check.h"

int main(int argc, char** argv) {
  uint64_t kernel_us = 1000;
  double seconds = 1.0;
  std::string mode = "greedy";
  int device = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--kernel-us") == 0)
      kernel_us = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::strtod(argv[i + 1], nullptr);
    if (std::strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    if (std::strcmp(argv[i], "--device") == 0) device = std::atoi(argv[i + 1]);
  }
  SIMGPU_CHECK(cuInit(0));
  CUdevice dev = 0;
  SIMGPU_CHECK(cuDeviceGet(&dev, device));
  CUcontext ctx = nullptr;
  SIMGPU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  SIMGPU_CHECK(cuCtxSetCurrent(ctx));
  CUmodule module = nullptr;
  SIMGPU_CHECK(cuModuleLoadData(&module, kSimgpuTestPtx));
  CUfunction spin = nullptr;
  SIMGPU_CHECK(cuModuleGetFunction(&spin, module, "spin"));
  CUstream stream = nullptr;
  SIMGPU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  unsigned long long ns = kernel_us * 1000;
  void* params[] = {&ns};
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t launches = 0;
  while (std::chrono::steady_clock::now() < end) {
    SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    if (mode == "sync") SIMGPU_CHECK(cuStreamSynchronize(stream));
    if (++launches == 1) {
      std::printf("ready\n");
      std::fflush(stdout);
    }
  }
  std::printf("done launches=%llu\n", static_cast<unsigned long long>(launches));
  std::fflush(stdout);
  // Exit with work still queued: the driver drops it, like a real teardown.
  return 0;
}
