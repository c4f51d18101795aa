// Kernel launches: one timed op of the duration given by the first kernel
// parameter; grid, block and shared memory are accepted and ignored. A
// collective kernel (collective_launch.h) is a kCollective op.
#include "driver/cuda_api.h"
// after cuda.h:
#include <cstring>

#include "driver/collective_launch.h"
#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/functions.h"
#include "driver/graphs.h"
#include "driver/streams.h"

using egpu::simgpu::driver::DefaultStream;
using egpu::simgpu::driver::guarded;
namespace drv = egpu::simgpu::driver;

namespace egpu::simgpu::driver {

uint64_t kernel_duration_ns(void** kernel_params, void** extra) {
  if (kernel_params != nullptr) {
    if (kernel_params[0] == nullptr) return 0;
    uint64_t ns = 0;
    std::memcpy(&ns, kernel_params[0], sizeof ns);
    return ns;
  }
  const auto [buffer, size] = param_buffer(extra);
  if (buffer == nullptr || size < sizeof(uint64_t)) return 0;
  uint64_t ns = 0;
  std::memcpy(&ns, buffer, sizeof ns);
  return ns;
}

}  // namespace egpu::simgpu::driver

namespace {

CUresult launch(CUfunction f, CUstream handle, void** params, void** extra,
                DefaultStream default_stream) {
  if (const CUresult rc = drv::require_init(); rc != CUDA_SUCCESS) return rc;
  const drv::LaunchKind kind = drv::launch_kind(f);
  if (kind == drv::LaunchKind::kInvalid) return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  const uint64_t duration = drv::kernel_duration_ns(params, extra);
  // A captured collective is recorded as a plain kernel of its duration: a
  // graph runs as one op, which cannot meet peers (a simplification).
  if (drv::capture_if_capturing(stream, duration)) return CUDA_SUCCESS;
  drv::SubmitRequest request;
  request.kind = egpu::simgpu::OpKind::kKernel;
  request.duration_ns = duration;
  request.is_launch = true;
  if (kind == drv::LaunchKind::kCollective) {
    if (const auto args = drv::collective_args(params, extra)) {
      request.kind = egpu::simgpu::OpKind::kCollective;
      request.group = drv::next_group_key(args->communicator, stream->ctx->physical);
      request.group_size = args->size;
    }
  }
  return drv::submit(stream, request, nullptr);
}

CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                   DefaultStream default_stream) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, config->hStream, params, extra, default_stream);
}

}  // namespace

CUresult egpu::simgpu::driver::launch_function(CUfunction f, CUstream stream, void** params,
                                               void** extra, bool per_thread_default) {
  return launch(f, stream, params, extra,
                per_thread_default ? DefaultStream::kPerThread : DefaultStream::kLegacy);
}

extern "C" {

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra) {
  (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
  (void)blockDimZ, (void)sharedMemBytes;
  return guarded([&] { return launch(f, hStream, kernelParams, extra, DefaultStream::kLegacy); });
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void** kernelParams, void** extra) {
  (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
  (void)blockDimZ, (void)sharedMemBytes;
  return guarded(
      [&] { return launch(f, hStream, kernelParams, extra, DefaultStream::kPerThread); });
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                          void** extra) {
  return guarded([&] { return launch_ex(config, f, kernelParams, extra, DefaultStream::kLegacy); });
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                               void** extra) {
  return guarded(
      [&] { return launch_ex(config, f, kernelParams, extra, DefaultStream::kPerThread); });
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void** kernelParams) {
  (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
  (void)blockDimZ, (void)sharedMemBytes;
  return guarded([&] { return launch(f, hStream, kernelParams, nullptr, DefaultStream::kLegacy); });
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void** kernelParams) {
  (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
  (void)blockDimZ, (void)sharedMemBytes;
  return guarded(
      [&] { return launch(f, hStream, kernelParams, nullptr, DefaultStream::kPerThread); });
}

}  // extern "C"
