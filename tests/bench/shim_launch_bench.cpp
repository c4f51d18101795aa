// shim_launch_bench [--launches N] [--rounds R] [--stream default|created] [--direct 1]
// Launches N zero-length kernels as fast as it can, R rounds, and prints the
// host cost per launch as one JSON line (the median round, and the best).
// --direct 1 also times, interleaved with those rounds, loops that call the
// driver's own cuLaunchKernel (found with glibc's dlsym, which the shim does
// not see): the paired difference is the wrapper's cost in the same process,
// free of the noise between processes. Without the shim it is ~0.
// Run it on simgpu (LD_LIBRARY_PATH=$SIMGPU_LIB_DIR, a private SIMGPU_SHM)
// with and without LD_PRELOAD=libegpu-shim.so: the difference is the shim's
// cost per launch. scripts/bench runs it while the agent grants the instance
// 100% (so the shim's fast path is measured); without EGPU_JOB_ID it measures
// the pass-through path. Figures only: nothing is asserted.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
using DlsymFn = void* (*)(void*, const char*);

// The driver's cuLaunchKernel, bypassing any interposed dlsym: glibc's own
// dlsym (reached with dlvsym, which the shim leaves alone) on libcuda's handle.
LaunchFn driver_launch() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (libc == nullptr || cuda == nullptr) return nullptr;
  void* sym = dlvsym(libc, "dlsym", "GLIBC_2.34");
  if (sym == nullptr) sym = dlvsym(libc, "dlsym", "GLIBC_2.2.5");
  if (sym == nullptr) return nullptr;
  const auto glibc_dlsym = reinterpret_cast<DlsymFn>(sym);
  return reinterpret_cast<LaunchFn>(glibc_dlsym(cuda, "cuLaunchKernel"));
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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
  bool direct = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--launches") == 0) launches = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--stream") == 0) stream_kind = argv[i + 1];
    if (std::strcmp(argv[i], "--direct") == 0) direct = std::atoi(argv[i + 1]) != 0;
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

  const LaunchFn real_launch = direct ? driver_launch() : nullptr;
  if (direct && real_launch == nullptr) {
    std::fprintf(stderr, "shim_launch_bench: the driver's cuLaunchKernel was not found\n");
    return 2;
  }
  // Host ns per launch of one loop through `launch`.
  auto time_loop = [&](LaunchFn launch) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < launches; ++i) {
      check(launch(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), "launch");
    }
    const auto end = std::chrono::steady_clock::now();
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    return std::chrono::duration<double, std::nano>(end - start).count() /
           static_cast<double>(launches);
  };
  // Context switches over the timed loops: a launcher that blocks (in the
  // gate, or in the driver) switches voluntarily; a busy machine preempts it.
  rusage usage_before{};
  getrusage(RUSAGE_SELF, &usage_before);
  std::vector<double> per_launch;
  std::vector<double> per_launch_direct;
  std::vector<double> paired;
  for (int r = 0; r < rounds; ++r) {
    if (!direct) {
      per_launch.push_back(time_loop(&cuLaunchKernel));
      continue;
    }
    // Alternate which goes first, so neither side always meets a warmer machine.
    const double first = time_loop(r % 2 == 0 ? &cuLaunchKernel : real_launch);
    const double second = time_loop(r % 2 == 0 ? real_launch : &cuLaunchKernel);
    per_launch.push_back(r % 2 == 0 ? first : second);
    per_launch_direct.push_back(r % 2 == 0 ? second : first);
    paired.push_back(per_launch.back() - per_launch_direct.back());
  }
  rusage usage_after{};
  getrusage(RUSAGE_SELF, &usage_after);
  std::vector<double> sorted = per_launch;
  std::sort(sorted.begin(), sorted.end());
  char direct_fields[160] = "";
  if (direct) {
    std::snprintf(direct_fields, sizeof direct_fields,
                  ",\"direct_ns_per_launch_median\":%.1f,\"paired_difference_ns_median\":%.1f",
                  median_of(per_launch_direct), median_of(paired));
  }
  const bool shim = dlsym(RTLD_DEFAULT, "egpu_shim_wrapper_calls") != nullptr;
  const char* job = std::getenv("EGPU_JOB_ID");
  std::printf(
      "{\"bench\":\"shim_launch\",\"shim\":%s,\"managed\":%s,\"stream\":\"%s\","
      "\"launches_per_round\":%ld,\"rounds\":%d,\"ns_per_launch_median\":%.1f,"
      "\"ns_per_launch_best\":%.1f,\"voluntary_switches\":%ld,\"involuntary_switches\":%ld%s}\n",
      shim ? "true" : "false", job != nullptr && *job != '\0' ? "true" : "false",
      stream_kind.c_str(), launches, rounds, sorted[sorted.size() / 2], sorted.front(),
      usage_after.ru_nvcsw - usage_before.ru_nvcsw, usage_after.ru_nivcsw - usage_before.ru_nivcsw,
      direct_fields);
  return 0;
}
