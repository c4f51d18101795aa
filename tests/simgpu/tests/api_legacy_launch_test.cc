// The pre-CUDA-4 launch API (deprecated, still exported by every driver):
// parameters set piecewise per function, then cuLaunch/cuLaunchGrid(Async).
// The shim's tests launch through it as a job dodging the gate would, so the
// simulated driver must run it like the real one.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>

#include "api_fixture.h"

namespace egpu::simgpu::testing {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr float kExact = 1e-5f;

TEST_F(ApiTest, LegacyLaunchesRunTheParametersSetBeforeThem) {
  CUevent start = nullptr;
  CUevent stop = nullptr;
  ASSERT_EQ(cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&stop, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_DEFAULT), CUDA_SUCCESS);
  hold();
  ASSERT_EQ(cuEventRecord(start, nullptr), CUDA_SUCCESS);

  unsigned long long params[] = {2 * kMs, 0};
  ASSERT_EQ(cuParamSetSize(spin_, sizeof params), CUDA_SUCCESS);
  ASSERT_EQ(cuParamSetv(spin_, 0, params, sizeof params), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncSetBlockShape(spin_, 32, 1, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunch(spin_), CUDA_SUCCESS);                         // 2 ms
  ASSERT_EQ(cuLaunchGrid(spin_, 4, 2), CUDA_SUCCESS);               // 2 ms
  ASSERT_EQ(cuParamSeti(spin_, 0, 3 * kMs), CUDA_SUCCESS);          // low 32 bits of the duration
  ASSERT_EQ(cuLaunchGridAsync(spin_, 1, 1, stream), CUDA_SUCCESS);  // 3 ms, legacy-ordered
  ASSERT_EQ(cuEventRecord(stop, nullptr), CUDA_SUCCESS);
  release();
  ASSERT_EQ(cuEventSynchronize(stop), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
  EXPECT_NEAR(ms, 7.0f, kExact);

  EXPECT_EQ(cuLaunchGrid(spin_, 0, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuParamSetv(spin_, -1, params, sizeof params), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuParamSetSize(spin_, 1u << 20), CUDA_ERROR_INVALID_VALUE);
  int not_a_function = 0;
  EXPECT_EQ(cuLaunch(reinterpret_cast<CUfunction>(&not_a_function)), CUDA_ERROR_INVALID_HANDLE);
  cuStreamDestroy(stream);
  cuEventDestroy(start);
  cuEventDestroy(stop);
}

}  // namespace
}  // namespace egpu::simgpu::testing
