// cudart_greedy: the CUDA-runtime twin of tests/workloads' greedy, for
// tests/gpu/validate on a real GPU (the simulated driver cannot host cudart).
// Back-to-back spin kernels launched with <<<>>>, so every launch reaches the
// driver the way cudart programs do: dlopen("libcuda.so.1"), dlsym of
// cuGetProcAddress, then the entry points it returns. With the egpu shim
// preloaded and EGPU_DEBUG=1 the summary carries the shim's per-wrapper call
// counters, which prove the launches went through the shim.
//
//   cudart_greedy [--duration-s S] [--kernel-us K] [--iters-per-us X] [--label L]
//                 [--progress] [--calibrate-only]
// Prints one JSON object on stdout; with --progress a line
// "cudart-greedy[pid] t=<s>s launched=<n>" on stderr every second.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shim_counters.h"

namespace {

// The same dependent loop as tests/workloads/kernels/spin.cu: device time
// proportional to `iters`, whatever else shares the GPU.
__device__ unsigned long long g_spin_sink;

__global__ void spin(unsigned long long seed, unsigned long long iters) {
  unsigned long long x = seed ^ (0x9e3779b97f4a7c15ULL + threadIdx.x);
  for (unsigned long long i = 0; i < iters; ++i) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x << 7;
  }
  if (x == 0x2545f4914f6cdd1dULL) g_spin_sink = x;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cudart_greedy: %s: %s (%s)\n", what, cudaGetErrorName(e),
                 cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Options {
  double duration_s = 10;
  double kernel_us = 1000;
  double iters_per_us = 0;  // 0: calibrate (only right when alone on the GPU)
  std::string label = "cudart";
  bool progress = false;
  bool calibrate_only = false;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--duration-s" && has_value) {
      o->duration_s = std::atof(argv[++i]);
    } else if (a == "--kernel-us" && has_value) {
      o->kernel_us = std::atof(argv[++i]);
    } else if (a == "--iters-per-us" && has_value) {
      o->iters_per_us = std::atof(argv[++i]);
    } else if (a == "--label" && has_value) {
      o->label = argv[++i];
    } else if (a == "--progress") {
      o->progress = true;
    } else if (a == "--calibrate-only") {
      o->calibrate_only = true;
    } else {
      return false;
    }
  }
  return o->duration_s > 0 && o->kernel_us > 0 && o->iters_per_us >= 0;
}

// Device ms of one kernel of `iters` steps, the median of three.
float time_kernel(cudaStream_t s, unsigned long long iters) {
  cudaEvent_t start, end;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  std::array<float, 3> ms{};
  for (float& m : ms) {
    check(cudaEventRecord(start, s), "cudaEventRecord");
    spin<<<1, 32, 0, s>>>(0, iters);
    check(cudaGetLastError(), "launch");
    check(cudaEventRecord(end, s), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&m, start, end), "cudaEventElapsedTime");
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  std::sort(ms.begin(), ms.end());
  return ms[1];
}

// Loop steps per us: the slope between a >= 4 ms kernel and one an eighth its
// size, so the fixed launch cost cancels.
double calibrate(cudaStream_t s) {
  spin<<<1, 32, 0, s>>>(0, 1000);
  check(cudaStreamSynchronize(s), "warm-up");
  unsigned long long iters = 1ULL << 14;
  float big = time_kernel(s, iters);
  while (big < 4.0f && iters < (1ULL << 40)) {
    iters *= 4;
    big = time_kernel(s, iters);
  }
  const float small = time_kernel(s, iters / 8);
  const double slope_ms = static_cast<double>(big) - static_cast<double>(small);
  if (slope_ms <= 0) return 0;
  return static_cast<double>(iters - iters / 8) / (slope_ms * 1000.0);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: cudart_greedy [--duration-s S] [--kernel-us K] [--iters-per-us X] "
                 "[--label L] [--progress] [--calibrate-only]\n");
    return 2;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");

  const bool measured = o.iters_per_us == 0;
  const double iters_per_us = measured ? calibrate(s) : o.iters_per_us;
  if (iters_per_us <= 0) {
    std::fprintf(stderr, "cudart_greedy: calibration failed (no growth with work)\n");
    return 1;
  }
  if (o.calibrate_only) {
    std::printf("{\"workload\":\"cudart-greedy\",\"iters_per_us\":%.6f}\n", iters_per_us);
    return 0;
  }

  const auto iters = static_cast<unsigned long long>(o.kernel_us * iters_per_us);
  const auto start = std::chrono::steady_clock::now();
  auto next_progress = start + std::chrono::seconds(1);
  unsigned long long launched = 0;
  while (seconds_since(start) < o.duration_s) {
    spin<<<1, 32, 0, s>>>(launched, iters);
    check(cudaGetLastError(), "launch");
    ++launched;
    if (o.progress && std::chrono::steady_clock::now() >= next_progress) {
      next_progress += std::chrono::seconds(1);
      std::fprintf(stderr, "cudart-greedy[%d] t=%.1fs launched=%llu\n", static_cast<int>(getpid()),
                   seconds_since(start), launched);
    }
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  const double wall_s = seconds_since(start);
  std::printf(
      "{\"workload\":\"cudart-greedy\",\"label\":\"%s\",\"device_name\":\"%s\",\"wall_s\":%.4f,"
      "\"kernels\":%llu,\"kernel_us\":%.1f,\"device_time_s\":%.4f,\"iters_per_us\":%.6f,"
      "\"calibration\":\"%s\",\"shim\":%s}\n",
      o.label.c_str(), prop.name, wall_s, launched, o.kernel_us,
      static_cast<double>(launched) * o.kernel_us * 1e-6, iters_per_us,
      measured ? "measured" : "given", shim_counters_json().c_str());
  return 0;
}
