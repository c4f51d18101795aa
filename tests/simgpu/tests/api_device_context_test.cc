// Device queries, errors, contexts, modules through the exported API.
#include <cstring>
#include <string>

#include "api_fixture.h"

namespace egpu::simgpu::testing {
namespace {

TEST_F(ApiTest, DevicesLookLikeH100s) {
  int version = 0;
  EXPECT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
  int count = 0;
  ASSERT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 2);
  char name[128];
  ASSERT_EQ(cuDeviceGetName(name, sizeof name, 1), CUDA_SUCCESS);
  EXPECT_STREQ(name, "NVIDIA H100 80GB HBM3 (simulated)");
  ASSERT_EQ(cuDeviceGetName(name, 6, 1), CUDA_SUCCESS);
  EXPECT_STREQ(name, "NVIDI");
  int major = 0;
  int minor = -1;
  int sms = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
  EXPECT_EQ(major * 10 + minor, 90);
  EXPECT_EQ(sms, 132);
  int bus = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), CUDA_SUCCESS);
  EXPECT_EQ(bus, 0x43);
  int value = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 2),
            CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  EXPECT_EQ(cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
  EXPECT_EQ(total, kApiMemoryMb * kMiB);
}

TEST_F(ApiTest, DeviceIdentityMatchesTheEmulatedTopology) {
  CUuuid uuid{};
  ASSERT_EQ(cuDeviceGetUuid(&uuid, 1), CUDA_SUCCESS);
  const unsigned char expected[16] = {0x5e, 0xed, 0, 1, 0, 0, 0x40, 0,
                                      0x80, 0,    0, 0, 0, 0, 0,    0x43};
  EXPECT_EQ(std::memcmp(uuid.bytes, expected, 16), 0);
  char bus_id[32];
  ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, 0), CUDA_SUCCESS);
  EXPECT_STREQ(bus_id, "0000:1b:00.0");
  CUdevice dev = -1;
  EXPECT_EQ(cuDeviceGetByPCIBusId(&dev, "0000:43:00.0"), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&dev, "00000000:1B:00.0"), CUDA_SUCCESS);
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&dev, "0000:99:00.0"), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(ApiTest, ErrorNamesAndStrings) {
  const char* text = nullptr;
  ASSERT_EQ(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_OUT_OF_MEMORY");
  ASSERT_EQ(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "out of memory");
  ASSERT_EQ(cuGetErrorString(CUDA_ERROR_STUB_LIBRARY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "stub library");
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(12345), &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
}

TEST_F(ApiTest, ContextStackFollowsPushPopAndSet) {
  CUcontext current = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, ctx_);
  CUcontext other = nullptr;
  ASSERT_EQ(cuCtxCreate(&other, nullptr, 0, 1), CUDA_SUCCESS);
  cuCtxGetCurrent(&current);
  EXPECT_EQ(current, other);
  CUdevice dev = -1;
  EXPECT_EQ(cuCtxGetDevice(&dev), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  CUcontext popped = nullptr;
  EXPECT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, other);
  cuCtxGetCurrent(&current);
  EXPECT_EQ(current, ctx_);
  EXPECT_EQ(cuCtxPushCurrent(other), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);  // replaces the top
  EXPECT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, ctx_);
  cuCtxGetCurrent(&current);
  EXPECT_EQ(current, ctx_);  // the one pushed by SetUp
  EXPECT_EQ(cuCtxDestroy(other), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxPushCurrent(other), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxDestroy(other), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(ApiTest, WithoutACurrentContextCallsFail) {
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, 1024), CUDA_ERROR_INVALID_CONTEXT);
  CUstream stream = nullptr;
  EXPECT_EQ(cuStreamCreate(&stream, 0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(launch(1000), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxPushCurrent(popped), CUDA_SUCCESS);
}

TEST_F(ApiTest, PrimaryContextIsReferenceCounted) {
  CUcontext a = nullptr;
  CUcontext b = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&a, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&b, 1), CUDA_SUCCESS);
  EXPECT_EQ(a, b);
  unsigned int flags = 1;
  int active = 0;
  EXPECT_EQ(cuDevicePrimaryCtxGetState(1, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(cuCtxDestroy(a), CUDA_ERROR_INVALID_CONTEXT);  // primaries are released, not destroyed
  EXPECT_EQ(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  cuDevicePrimaryCtxGetState(1, &flags, &active);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  cuDevicePrimaryCtxGetState(1, &flags, &active);
  EXPECT_EQ(active, 0);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuDevicePrimaryCtxSetFlags(1, CU_CTX_SCHED_BLOCKING_SYNC), CUDA_SUCCESS);
  cuDevicePrimaryCtxGetState(1, &flags, &active);
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_BLOCKING_SYNC));
}

TEST_F(ApiTest, ModulesAcceptAnyImageButNeedReadableFiles) {
  CUmodule module = nullptr;
  EXPECT_EQ(cuModuleLoad(&module, "/nonexistent/kernel.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
  ASSERT_EQ(cuModuleLoad(&module, "/proc/self/comm"), CUDA_SUCCESS);
  CUfunction f = nullptr;
  CUfunction g = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&f, module, "any_name_at_all"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&g, module, "any_name_at_all"), CUDA_SUCCESS);
  EXPECT_EQ(f, g);
  const char* name = nullptr;
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
  EXPECT_STREQ(name, "any_name_at_all");
  EXPECT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
  unsigned long long ns = 1000;
  void* params[] = {&ns};
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(ApiTest, LibraryKernelsLaunchLikeFunctions) {
  CUlibrary library = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&library, "ptx", nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, library, "k"), CUDA_SUCCESS);
  CUfunction function = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&function, kernel), CUDA_SUCCESS);
  unsigned long long ns = 1000;
  void* params[] = {&ns};
  EXPECT_EQ(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, nullptr,
                           params, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(library), CUDA_SUCCESS);
}

TEST_F(ApiTest, ExportTableIsNotProvided) {
  const void* table = reinterpret_cast<const void*>(1);
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(table, nullptr);
}

}  // namespace
}  // namespace egpu::simgpu::testing
