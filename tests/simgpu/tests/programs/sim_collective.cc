// sim_collective --device D --comm C --size N [--kernel-us K] [--count M]
//                [--api module|library|extra]
// One member of a simulated collective: launches M collective kernels of K us
// (communicator C, group size N) on device D, prints "launched", waits for
// them with cuStreamSynchronize and prints "done <elapsed-us>" (device time
// between events around them), then waits for stdin to close, so that the
// test can read its statistics while it is alive. --api picks how: a module
// function "simgpu_collective_test" with kernelParams (module), a library
// kernel "ncclDevKernel_AllReduce_Sum_f32" (library), or the module function
// with a CU_LAUNCH_PARAM_BUFFER_POINTER buffer (extra).
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check.h"

namespace {

CUfunction collective_function(const std::string& api) {
  if (api == "library") {
    CUlibrary library = nullptr;
    SIMGPU_CHECK(
        cuLibraryLoadData(&library, kSimgpuTestPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUkernel kernel = nullptr;
    SIMGPU_CHECK(cuLibraryGetKernel(&kernel, library, "ncclDevKernel_AllReduce_Sum_f32"));
    CUfunction function = nullptr;
    SIMGPU_CHECK(cuKernelGetFunction(&function, kernel));
    return function;
  }
  CUmodule module = nullptr;
  SIMGPU_CHECK(cuModuleLoadData(&module, kSimgpuTestPtx));
  CUfunction function = nullptr;
  SIMGPU_CHECK(cuModuleGetFunction(&function, module, "simgpu_collective_test"));
  return function;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  unsigned long long comm = 1;
  unsigned int size = 2;
  uint64_t kernel_us = 1000;
  uint64_t count = 1;
  std::string api = "module";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--device") == 0) device = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--comm") == 0) comm = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--size") == 0) {
      size = static_cast<unsigned int>(std::strtoul(argv[i + 1], nullptr, 10));
    }
    if (std::strcmp(argv[i], "--kernel-us") == 0) {
      kernel_us = std::strtoull(argv[i + 1], nullptr, 10);
    }
    if (std::strcmp(argv[i], "--count") == 0) count = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--api") == 0) api = argv[i + 1];
  }
  SIMGPU_CHECK(cuInit(0));
  CUdevice dev = 0;
  SIMGPU_CHECK(cuDeviceGet(&dev, device));
  CUcontext ctx = nullptr;
  SIMGPU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  SIMGPU_CHECK(cuCtxSetCurrent(ctx));
  const CUfunction function = collective_function(api);
  CUstream stream = nullptr;
  SIMGPU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent start = nullptr;
  CUevent end = nullptr;
  SIMGPU_CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  SIMGPU_CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));

  unsigned long long ns = kernel_us * 1000;
  SIMGPU_CHECK(cuEventRecord(start, stream));
  for (uint64_t i = 0; i < count; ++i) {
    if (api == "extra") {
      struct {
        unsigned long long ns, comm;
        unsigned int size;
      } buffer{ns, comm, size};
      size_t buffer_size = sizeof buffer;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buffer, CU_LAUNCH_PARAM_BUFFER_SIZE,
                       &buffer_size, CU_LAUNCH_PARAM_END};
      SIMGPU_CHECK(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, extra));
    } else {
      void* params[] = {&ns, &comm, &size};
      SIMGPU_CHECK(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    }
  }
  SIMGPU_CHECK(cuEventRecord(end, stream));
  std::printf("launched\n");
  std::fflush(stdout);
  SIMGPU_CHECK(cuStreamSynchronize(stream));
  float ms = 0;
  SIMGPU_CHECK(cuEventElapsedTime(&ms, start, end));
  std::printf("done %lld\n", static_cast<long long>(ms * 1000.0f));
  std::fflush(stdout);
  char line[16];
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
  }
  return 0;
}
