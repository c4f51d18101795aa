// shim_launch_bench [--launches N] [--rounds R] [--stream default|created]
// Launches N zero-length kernels as fast as it can, R rounds, and prints the
// host cost per launch as one JSON line (the median round, and the best).
// Run it on simgpu (LD_LIBRARY_PATH=$SIMGPU_LIB_DIR, a private SIMGPU_SHM)
// with and without LD_PRELOAD=libegpu-shim.so: the difference is the shim's
// cost per launch. scripts/bench runs it while the agent grants the instance
// 100% (so the shim's fast path is measured); without EGPU_JOB_ID it measures
// the pass-through path. Figures only: nothing is asserted.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "shim_launch_bench: %s failed: %d\n", what, static_cast<int>(r));
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  long launches = 200000;
  int rounds = 5;
  std::string stream_kind = "created";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--launches") == 0) launches = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--stream") == 0) stream_kind = argv[i + 1];
  }
  if (launches <= 0 || rounds <= 0) return 1;

  check(cuInit(0), "cuInit");
  CUdevice dev = 0;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  check(cuModuleLoadData(&module, "bench"), "cuModuleLoadData");
  CUfunction kernel = nullptr;
  check(cuModuleGetFunction(&kernel, module, "spin"), "cuModuleGetFunction");
  CUstream stream = nullptr;
  if (stream_kind == "created") check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream");

  unsigned long long zero = 0;
  void* params[] = {&zero};
  // Warm up: first-use work (attach, stream tables, events) is not measured.
  for (int i = 0; i < 1000; ++i) {
    check(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), "warm-up");
  }
  check(cuCtxSynchronize(), "cuCtxSynchronize");

  std::vector<double> per_launch;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < launches; ++i) {
      check(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), "launch");
    }
    const auto end = std::chrono::steady_clock::now();
    per_launch.push_back(std::chrono::duration<double, std::nano>(end - start).count() /
                         static_cast<double>(launches));
    check(cuCtxSynchronize(), "cuCtxSynchronize");
  }
  std::vector<double> sorted = per_launch;
  std::sort(sorted.begin(), sorted.end());
  const bool shim = dlsym(RTLD_DEFAULT, "egpu_shim_wrapper_calls") != nullptr;
  const char* job = std::getenv("EGPU_JOB_ID");
  std::printf(
      "{\"bench\":\"shim_launch\",\"shim\":%s,\"managed\":%s,\"stream\":\"%s\","
      "\"launches_per_round\":%ld,\"rounds\":%d,\"ns_per_launch_median\":%.1f,"
      "\"ns_per_launch_best\":%.1f}\n",
      shim ? "true" : "false", job != nullptr && *job != '\0' ? "true" : "false",
      stream_kind.c_str(), launches, rounds, sorted[sorted.size() / 2], sorted.front());
  return 0;
}
