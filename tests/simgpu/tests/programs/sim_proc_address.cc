// sim_proc_address: reaches the driver the way cudart does (dlopen +
// cuGetProcAddress_v2 only), checks the symbol table's answers against dlsym,
// then runs a kernel through the returned per-thread-stream pointers.
// Prints "FAIL ..." per failed check; the exit status is the failure count.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "check.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("FAIL dlopen: %s\n", dlerror());
    return 100;
  }
  auto get = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get == nullptr) {
    std::printf("FAIL no cuGetProcAddress_v2\n");
    return 100;
  }
  const auto lookup = [&](const char* name, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
    void* fn = nullptr;
    *status = static_cast<CUdriverProcAddressQueryResult>(-1);
    const CUresult rc = get(name, &fn, version, flags, status);
    return rc == CUDA_SUCCESS ? fn : nullptr;
  };
  const auto expect_same = [&](const char* name, int version, cuuint64_t flags, const char* abi) {
    CUdriverProcAddressQueryResult status;
    void* fn = lookup(name, version, flags, &status);
    expect(status == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr && fn == dlsym(lib, abi),
           std::string(name) + "@" + std::to_string(version) + " flags " + std::to_string(flags) +
               " should be " + abi);
  };

  CUdriverProcAddressQueryResult status;
  void* fn = reinterpret_cast<void*>(1);
  const CUresult probe = get("", &fn, 0, 0, &status);  // cudart's first call
  expect(probe == CUDA_ERROR_NOT_FOUND && fn == nullptr &&
             status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
         "probe with \"\" and version 0");
  expect_same("cuLaunchKernel", 12000, 0, "cuLaunchKernel");
  expect_same("cuLaunchKernel", 12000, 1, "cuLaunchKernel");
  expect_same("cuLaunchKernel", 12000, 2, "cuLaunchKernel_ptsz");
  expect_same("cuLaunchKernel", 4000, 2, "cuLaunchKernel");  // no _ptsz before 7.0
  expect_same("cuCtxCreate", 2000, 0, "cuCtxCreate");
  expect_same("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
  expect_same("cuCtxCreate", 12050, 0, "cuCtxCreate_v4");
  expect_same("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
  expect_same("cuEventElapsedTime", 12000, 0, "cuEventElapsedTime");
  expect_same("cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2");
  expect_same("cuMemcpyHtoD", 12000, 2, "cuMemcpyHtoD_v2_ptds");
  expect_same("cuMemcpyHtoD", 12000, 0, "cuMemcpyHtoD_v2");
  expect_same("cuMemAlloc", 12000, 2, "cuMemAlloc_v2");
  expect_same("cuStreamBeginCapture", 12000, 2, "cuStreamBeginCapture_v2_ptsz");
  expect_same("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
  expect_same("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
  lookup("cuLaunchKernelEx", 11000, 0, &status);
  expect(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "cuLaunchKernelEx@11000");
  expect(lookup("cuNoSuchFunction", 13000, 0, &status) == nullptr &&
             status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
         "unknown symbol");
  expect(dlsym(lib, "cuGetExportTable") != nullptr, "cuGetExportTable exported");

  // The returned functions work.
#define SIMGPU_GET(name, version, flags, type) \
  reinterpret_cast<type>(lookup(#name, version, flags, &status))
  auto init = SIMGPU_GET(cuInit, 13000, 0, PFN_cuInit_v2000);
  auto device_get = SIMGPU_GET(cuDeviceGet, 13000, 0, PFN_cuDeviceGet_v2000);
  auto retain = SIMGPU_GET(cuDevicePrimaryCtxRetain, 13000, 0, PFN_cuDevicePrimaryCtxRetain_v7000);
  auto set_current = SIMGPU_GET(cuCtxSetCurrent, 13000, 0, PFN_cuCtxSetCurrent_v4000);
  auto load = SIMGPU_GET(cuModuleLoadData, 13000, 0, PFN_cuModuleLoadData_v2000);
  auto get_function = SIMGPU_GET(cuModuleGetFunction, 13000, 0, PFN_cuModuleGetFunction_v2000);
  auto event_create = SIMGPU_GET(cuEventCreate, 13000, 0, PFN_cuEventCreate_v2000);
  auto record = SIMGPU_GET(cuEventRecord, 13000, 2, PFN_cuEventRecord_v7000_ptsz);
  auto launch = SIMGPU_GET(cuLaunchKernel, 13000, 2, PFN_cuLaunchKernel_v7000_ptsz);
  auto event_sync = SIMGPU_GET(cuEventSynchronize, 13000, 0, PFN_cuEventSynchronize_v2000);
  auto elapsed = SIMGPU_GET(cuEventElapsedTime, 13000, 0, PFN_cuEventElapsedTime_v12080);
#undef SIMGPU_GET
  if (!init || !device_get || !retain || !set_current || !load || !get_function || !event_create ||
      !record || !launch || !event_sync || !elapsed) {
    std::printf("FAIL a function was not found\n");
    return failures + 1;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction spin = nullptr;
  CUevent start = nullptr;
  CUevent stop = nullptr;
  const bool setup = init(0) == CUDA_SUCCESS && device_get(&dev, 0) == CUDA_SUCCESS &&
                     retain(&ctx, dev) == CUDA_SUCCESS && set_current(ctx) == CUDA_SUCCESS &&
                     load(&module, kSimgpuTestPtx) == CUDA_SUCCESS &&
                     get_function(&spin, module, "spin") == CUDA_SUCCESS &&
                     event_create(&start, 0) == CUDA_SUCCESS &&
                     event_create(&stop, 0) == CUDA_SUCCESS;
  expect(setup, "setup through cuGetProcAddress pointers");
  if (!setup) return failures;
  // A first kernel keeps the device busy, so both events are stamped by the
  // device back to back, whatever the host's timing.
  unsigned long long warmup_ns = 2'000'000;
  void* warmup_params[] = {&warmup_ns};
  expect(launch(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, warmup_params, nullptr) == CUDA_SUCCESS,
         "warm-up launch");
  unsigned long long ns = 3'000'000;
  void* params[] = {&ns};
  expect(record(start, nullptr) == CUDA_SUCCESS, "record start (per-thread stream)");
  expect(launch(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) == CUDA_SUCCESS,
         "launch (per-thread stream)");
  expect(record(stop, nullptr) == CUDA_SUCCESS, "record stop");
  expect(event_sync(stop) == CUDA_SUCCESS, "event synchronize");
  float ms = 0;
  const CUresult timed = elapsed(&ms, start, stop);
  expect(
      timed == CUDA_SUCCESS && std::fabs(ms - 3.0f) < 1e-5f,
      "3 ms kernel timed as " + std::to_string(ms) + " ms (result " + std::to_string(timed) + ")");
  std::printf("done failures=%d\n", failures);
  return failures;
}
