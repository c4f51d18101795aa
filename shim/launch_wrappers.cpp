// The launch entry points: every path that queues kernels on the GPU.
#include "shim/launch_path.h"

using egpu::shim::DefaultStream;
using egpu::shim::paced_launch;
using egpu::shim::RealId;

extern "C" {

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams,
                                void** extra) {
  EGPU_REAL_OR_RETURN(cuLaunchKernel);
  return paced_launch(RealId::cuLaunchKernel, hStream, DefaultStream::kLegacy, [&] {
    return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                hStream, kernelParams, extra);
  });
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra) {
  EGPU_REAL_OR_RETURN(cuLaunchKernel_ptsz);
  return paced_launch(RealId::cuLaunchKernel_ptsz, hStream, DefaultStream::kPerThread, [&] {
    return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                hStream, kernelParams, extra);
  });
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                  void** extra) {
  EGPU_REAL_OR_RETURN(cuLaunchKernelEx);
  CUstream stream = config != nullptr ? config->hStream : nullptr;
  return paced_launch(RealId::cuLaunchKernelEx, stream, DefaultStream::kLegacy,
                      [&] { return real(config, f, kernelParams, extra); });
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                       void** kernelParams, void** extra) {
  EGPU_REAL_OR_RETURN(cuLaunchKernelEx_ptsz);
  CUstream stream = config != nullptr ? config->hStream : nullptr;
  return paced_launch(RealId::cuLaunchKernelEx_ptsz, stream, DefaultStream::kPerThread,
                      [&] { return real(config, f, kernelParams, extra); });
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                           unsigned int gridDimY, unsigned int gridDimZ,
                                           unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes,
                                           CUstream hStream, void** kernelParams) {
  EGPU_REAL_OR_RETURN(cuLaunchCooperativeKernel);
  return paced_launch(RealId::cuLaunchCooperativeKernel, hStream, DefaultStream::kLegacy, [&] {
    return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                hStream, kernelParams);
  });
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ, unsigned int sharedMemBytes,
                                                CUstream hStream, void** kernelParams) {
  EGPU_REAL_OR_RETURN(cuLaunchCooperativeKernel_ptsz);
  return paced_launch(RealId::cuLaunchCooperativeKernel_ptsz, hStream, DefaultStream::kPerThread,
                      [&] {
                        return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                    blockDimZ, sharedMemBytes, hStream, kernelParams);
                      });
}

// Deprecated, several devices at once: gated on the current device like the
// others; its streams are not paced (they belong to several devices).
CUresult CUDAAPI cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS* launchParamsList,
                                                      unsigned int numDevices, unsigned int flags) {
  EGPU_REAL_OR_RETURN(cuLaunchCooperativeKernelMultiDevice);
  CUstream stream =
      launchParamsList != nullptr && numDevices > 0 ? launchParamsList[0].hStream : nullptr;
  return paced_launch(RealId::cuLaunchCooperativeKernelMultiDevice, stream, DefaultStream::kLegacy,
                      [&] { return real(launchParamsList, numDevices, flags); });
}

// Pre-CUDA-4 launches, deprecated but still in every driver: the kernel's
// parameters and block shape were set before with cuParamSet* and
// cuFuncSetBlockShape, so the launch itself names only the grid. Without
// these a job could queue unbounded device time around the gate.
CUresult CUDAAPI cuLaunch(CUfunction f) {
  EGPU_REAL_OR_RETURN(cuLaunch);
  return paced_launch(RealId::cuLaunch, nullptr, DefaultStream::kLegacy, [&] { return real(f); });
}

CUresult CUDAAPI cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  EGPU_REAL_OR_RETURN(cuLaunchGrid);
  return paced_launch(RealId::cuLaunchGrid, nullptr, DefaultStream::kLegacy,
                      [&] { return real(f, grid_width, grid_height); });
}

CUresult CUDAAPI cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                                   CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuLaunchGridAsync);
  return paced_launch(RealId::cuLaunchGridAsync, hStream, DefaultStream::kLegacy,
                      [&] { return real(f, grid_width, grid_height, hStream); });
}

}  // extern "C"
