#include "api_fixture.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "model/segment.h"

namespace egpu::simgpu::testing {
namespace {

constexpr char kPtx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";

class SimgpuEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    name_ = "/simgpu-api-test-" + std::to_string(::getpid());
    ::setenv("SIMGPU_SHM", name_.c_str(), 1);
    ::setenv("SIMGPU_DEVICES", "2", 1);
    ::setenv("SIMGPU_MEMORY_MB", std::to_string(kApiMemoryMb).c_str(), 1);
    ::setenv("SIMGPU_LABEL", "api-test", 1);
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    unlink_segment(name_);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void TearDown() override { unlink_segment(name_); }

 private:
  std::string name_;
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new SimgpuEnvironment);

}  // namespace

void ApiTest::SetUp() {
  CUdevice dev = 0;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate(&ctx_, nullptr, 0, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleLoadData(&module_, kPtx), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&spin_, module_, "spin"), CUDA_SUCCESS);
}

void ApiTest::TearDown() {
  if (peer_module_ != nullptr) {
    EXPECT_EQ(cuModuleUnload(peer_module_), CUDA_SUCCESS);
  }
  if (peer_ != nullptr) {
    EXPECT_EQ(cuCtxDestroy(peer_), CUDA_SUCCESS);
  }
  if (module_ != nullptr) {
    EXPECT_EQ(cuModuleUnload(module_), CUDA_SUCCESS);
  }
  if (ctx_ != nullptr) {
    EXPECT_EQ(cuCtxDestroy(ctx_), CUDA_SUCCESS);
  }
  CUcontext current = nullptr;
  while (cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr) {
    cuCtxPopCurrent(&current);
  }
}

CUresult ApiTest::launch(uint64_t ns, CUstream stream) {
  unsigned long long duration = ns;
  void* params[] = {&duration};
  return cuLaunchKernel(spin_, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr);
}

namespace {

// A collective part (README: collective kernels) of no time of its own, of
// a group of two.
CUresult launch_part(CUmodule module, uint64_t group, CUstream stream) {
  CUfunction part = nullptr;
  if (CUresult r = cuModuleGetFunction(&part, module, "simgpu_collective_hold");
      r != CUDA_SUCCESS) {
    return r;
  }
  unsigned long long ns = 0;
  unsigned long long comm = group;
  unsigned int size = 2;
  void* params[] = {&ns, &comm, &size};
  return cuLaunchKernel(part, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr);
}

}  // namespace

void ApiTest::hold(CUstream stream) {
  static uint64_t next = 0;
  hold_group_ = (uint64_t{static_cast<uint32_t>(::getpid())} << 20) + ++next;
  ASSERT_EQ(launch_part(module_, hold_group_, stream), CUDA_SUCCESS);
}

void ApiTest::release() {
  CUdevice dev = 0;
  ASSERT_EQ(cuDeviceGet(&dev, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate(&peer_, nullptr, 0, dev), CUDA_SUCCESS);  // current now
  ASSERT_EQ(cuModuleLoadData(&peer_module_, kPtx), CUDA_SUCCESS);
  EXPECT_EQ(launch_part(peer_module_, hold_group_, nullptr), CUDA_SUCCESS);
  // A part arrives when its device is next looked at: now, not when
  // something happens to look at device 1.
  (void)cuStreamQuery(nullptr);
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
}

float ApiTest::elapsed_ms(CUevent start, CUevent stop) {
  EXPECT_EQ(cuEventSynchronize(stop), CUDA_SUCCESS);
  float ms = -1;
  EXPECT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
  return ms;
}

size_t ApiTest::free_memory() {
  size_t free_bytes = 0;
  size_t total = 0;
  EXPECT_EQ(cuMemGetInfo(&free_bytes, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, kApiMemoryMb * kMiB);
  return free_bytes;
}

}  // namespace egpu::simgpu::testing
