// sim_memory MODE [MB]: memory and liveness scenarios for simgpu's tests.
//   hold MB      allocate MB, print "allocated", exit when stdin closes
//   alloc MB     try to allocate MB, print "result=<CUresult name>"
//   info         print "free=<bytes> total=<bytes>"
//   stall MB     allocate MB, print "launching", launch a kernel (run with
//                SIMGPU_DEBUG_STALL_IN_DRIVER_MS to stall in the driver)
//   probe        launch 5 x 1 ms kernels, synchronize, print memory info
//   devices      print the visible devices: "count=<n>" and "device <i> <bus id>"
#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check.h"

namespace {

CUcontext make_context() {
  SIMGPU_CHECK(cuInit(0));
  CUdevice dev = 0;
  SIMGPU_CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  SIMGPU_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
  return ctx;
}

void print_info() {
  size_t free_bytes = 0;
  size_t total = 0;
  SIMGPU_CHECK(cuMemGetInfo(&free_bytes, &total));
  std::printf("free=%zu total=%zu\n", free_bytes, total);
  std::fflush(stdout);
}

void say(const char* line) {
  std::printf("%s\n", line);
  std::fflush(stdout);
}

CUfunction load_spin() {
  CUmodule module = nullptr;
  SIMGPU_CHECK(cuModuleLoadData(&module, kSimgpuTestPtx));
  CUfunction spin = nullptr;
  SIMGPU_CHECK(cuModuleGetFunction(&spin, module, "spin"));
  return spin;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) << 20 : 0;
  if (mode == "devices") {
    SIMGPU_CHECK(cuInit(0));
    int count = 0;
    SIMGPU_CHECK(cuDeviceGetCount(&count));
    std::printf("count=%d\n", count);
    for (int i = 0; i < count; ++i) {
      char bus[32];
      SIMGPU_CHECK(cuDeviceGetPCIBusId(bus, sizeof bus, i));
      std::printf("device %d %s\n", i, bus);
    }
    return 0;
  }
  make_context();
  if (mode == "info") {
    print_info();
  } else if (mode == "hold") {
    CUdeviceptr p = 0;
    SIMGPU_CHECK(cuMemAlloc(&p, bytes));
    say("allocated");
    char buf[64];
    while (::read(0, buf, sizeof buf) > 0) {
    }
  } else if (mode == "alloc") {
    CUdeviceptr p = 0;
    const char* name = nullptr;
    cuGetErrorName(cuMemAlloc(&p, bytes), &name);
    std::printf("result=%s\n", name);
  } else if (mode == "stall") {
    CUdeviceptr p = 0;
    SIMGPU_CHECK(cuMemAlloc(&p, bytes));
    CUfunction spin = load_spin();
    say("launching");
    unsigned long long ns = 1000000;
    void* params[] = {&ns};
    SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    say("launched");
  } else if (mode == "probe") {
    CUfunction spin = load_spin();
    unsigned long long ns = 1000000;
    void* params[] = {&ns};
    for (int i = 0; i < 5; ++i) {
      SIMGPU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    }
    SIMGPU_CHECK(cuCtxSynchronize());
    print_info();
  } else {
    return 2;
  }
  return 0;
}
