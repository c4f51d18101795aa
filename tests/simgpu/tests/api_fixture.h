// In-process tests of the exported driver API: the test binary links
// libcuda.so.1 (simgpu) like any CUDA program. A global environment gives the
// process its own segment (2 devices of 1 GiB) before cuInit.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace egpu::simgpu::testing {

inline constexpr uint64_t kApiMemoryMb = 1024;
inline constexpr uint64_t kMiB = 1 << 20;

// Each test runs in a fresh context of device 0 with a kernel function.
class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Launches a kernel of `ns` on `stream`.
  CUresult launch(uint64_t ns, CUstream stream = nullptr);
  // Holds the current context's `stream` behind a collective whose other
  // part, on device 1, is launched only by release(): what a test queues
  // meanwhile runs back to back once released, however late a busy host
  // queued it (a long first kernel held it only for a guess of that).
  void hold(CUstream stream = nullptr);
  void release();
  // Device time between two events, in ms.
  float elapsed_ms(CUevent start, CUevent stop);
  // Free device memory as cuMemGetInfo reports it.
  size_t free_memory();

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction spin_ = nullptr;
  uint64_t hold_group_ = 0;
  CUcontext peer_ = nullptr;  // device 1's, for release()
  CUmodule peer_module_ = nullptr;
};

}  // namespace egpu::simgpu::testing
