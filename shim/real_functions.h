// The real driver's functions, resolved lazily from the real libcuda.so.1 through
// glibc's own dlsym: never through RTLD_DEFAULT/RTLD_NEXT of our own names,
// which would find the shim's wrappers.
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/cuda_api.h"

// Every CUDA ABI name the shim defines a wrapper for.
#define EGPU_WRAPPED_FUNCTIONS(X)         \
  X(cuInit)                               \
  X(cuGetProcAddress)                     \
  X(cuGetProcAddress_v2)                  \
  X(cuLaunchKernel)                       \
  X(cuLaunchKernel_ptsz)                  \
  X(cuLaunchKernelEx)                     \
  X(cuLaunchKernelEx_ptsz)                \
  X(cuLaunchCooperativeKernel)            \
  X(cuLaunchCooperativeKernel_ptsz)       \
  X(cuLaunchCooperativeKernelMultiDevice) \
  X(cuLaunch)                             \
  X(cuLaunchGrid)                         \
  X(cuLaunchGridAsync)                    \
  X(cuGraphLaunch)                        \
  X(cuGraphLaunch_ptsz)                   \
  X(cuGraphUpload)                        \
  X(cuGraphUpload_ptsz)                   \
  X(cuGraphInstantiate)                   \
  X(cuGraphInstantiate_v2)                \
  X(cuGraphInstantiateWithFlags)          \
  X(cuGraphInstantiateWithParams)         \
  X(cuGraphInstantiateWithParams_ptsz)    \
  X(cuGraphExecDestroy)                   \
  X(cuDeviceGraphMemTrim)                 \
  X(cuMemPoolCreate)                      \
  X(cuMemPoolTrimTo)                      \
  X(cuMemPoolDestroy)                     \
  X(cuStreamBeginCapture)                 \
  X(cuStreamBeginCapture_ptsz)            \
  X(cuStreamBeginCapture_v2)              \
  X(cuStreamBeginCapture_v2_ptsz)         \
  X(cuStreamBeginCaptureToGraph)          \
  X(cuStreamBeginCaptureToGraph_ptsz)     \
  X(cuStreamEndCapture)                   \
  X(cuStreamEndCapture_ptsz)              \
  X(cuCtxSynchronize)                     \
  X(cuCtxSynchronize_v2)                  \
  X(cuStreamSynchronize)                  \
  X(cuStreamSynchronize_ptsz)             \
  X(cuEventSynchronize)                   \
  X(cuMemcpyHtoD)                         \
  X(cuMemcpyHtoD_v2)                      \
  X(cuMemcpyHtoD_v2_ptds)                 \
  X(cuMemcpyDtoH)                         \
  X(cuMemcpyDtoH_v2)                      \
  X(cuMemcpyDtoH_v2_ptds)                 \
  X(cuMemcpyDtoD)                         \
  X(cuMemcpyDtoD_v2)                      \
  X(cuMemcpyDtoD_v2_ptds)                 \
  X(cuMemcpy)                             \
  X(cuMemcpy_ptds)                        \
  X(cuMemsetD8)                           \
  X(cuMemsetD8_v2)                        \
  X(cuMemsetD8_v2_ptds)                   \
  X(cuMemsetD8Async)                      \
  X(cuMemsetD8Async_ptsz)                 \
  X(cuMemsetD16)                          \
  X(cuMemsetD16_v2)                       \
  X(cuMemsetD16_v2_ptds)                  \
  X(cuMemsetD16Async)                     \
  X(cuMemsetD16Async_ptsz)                \
  X(cuMemsetD32)                          \
  X(cuMemsetD32_v2)                       \
  X(cuMemsetD32_v2_ptds)                  \
  X(cuMemsetD32Async)                     \
  X(cuMemsetD32Async_ptsz)                \
  X(cuMemsetD2D8)                         \
  X(cuMemsetD2D8_v2)                      \
  X(cuMemsetD2D8_v2_ptds)                 \
  X(cuMemsetD2D8Async)                    \
  X(cuMemsetD2D8Async_ptsz)               \
  X(cuMemsetD2D16)                        \
  X(cuMemsetD2D16_v2)                     \
  X(cuMemsetD2D16_v2_ptds)                \
  X(cuMemsetD2D16Async)                   \
  X(cuMemsetD2D16Async_ptsz)              \
  X(cuMemsetD2D32)                        \
  X(cuMemsetD2D32_v2)                     \
  X(cuMemsetD2D32_v2_ptds)                \
  X(cuMemsetD2D32Async)                   \
  X(cuMemsetD2D32Async_ptsz)              \
  X(cuStreamDestroy)                      \
  X(cuStreamDestroy_v2)                   \
  X(cuCtxDestroy)                         \
  X(cuCtxDestroy_v2)                      \
  X(cuDevicePrimaryCtxReset)              \
  X(cuDevicePrimaryCtxReset_v2)           \
  X(cuDevicePrimaryCtxRelease)            \
  X(cuDevicePrimaryCtxRelease_v2)         \
  X(cuMemAlloc)                           \
  X(cuMemAlloc_v2)                        \
  X(cuMemAllocPitch)                      \
  X(cuMemAllocPitch_v2)                   \
  X(cuMemAllocManaged)                    \
  X(cuMemAllocAsync)                      \
  X(cuMemAllocAsync_ptsz)                 \
  X(cuMemAllocFromPoolAsync)              \
  X(cuMemAllocFromPoolAsync_ptsz)         \
  X(cuMemCreate)                          \
  X(cuMemRelease)                         \
  X(cuMemMap)                             \
  X(cuMemUnmap)                           \
  X(cuMemRetainAllocationHandle)          \
  X(cuMemImportFromShareableHandle)       \
  X(cuIpcOpenMemHandle)                   \
  X(cuIpcOpenMemHandle_v2)                \
  X(cuIpcCloseMemHandle)                  \
  X(cuMemPoolImportPointer)               \
  X(cuCtxSetLimit)                        \
  X(cuArrayCreate)                        \
  X(cuArrayCreate_v2)                     \
  X(cuArray3DCreate)                      \
  X(cuArray3DCreate_v2)                   \
  X(cuMipmappedArrayCreate)               \
  X(cuArrayDestroy)                       \
  X(cuMipmappedArrayDestroy)              \
  X(cuMemFree)                            \
  X(cuMemFree_v2)                         \
  X(cuMemFreeAsync)                       \
  X(cuMemFreeAsync_ptsz)                  \
  X(cuMemGetInfo)                         \
  X(cuMemGetInfo_v2)                      \
  X(cuDeviceTotalMem)                     \
  X(cuDeviceTotalMem_v2)

// Functions the shim only calls (events for pacing, context queries).
#define EGPU_HELPER_FUNCTIONS(X)            \
  X(cuEventCreate)                          \
  X(cuEventDestroy_v2)                      \
  X(cuEventRecord)                          \
  X(cuEventQuery)                           \
  X(cuEventElapsedTime)                     \
  X(cuEventElapsedTime_v2)                  \
  X(cuStreamIsCapturing)                    \
  X(cuStreamGetCtx)                         \
  X(cuCtxGetCurrent)                        \
  X(cuCtxGetDevice)                         \
  X(cuCtxGetLimit)                          \
  X(cuDeviceGetAttribute)                   \
  X(cuDevicePrimaryCtxGetState)             \
  X(cuDevicePrimaryCtxRetain)               \
  X(cuMemGetAddressRange_v2)                \
  X(cuMemGetAllocationPropertiesFromHandle) \
  X(cuDeviceGet)                            \
  X(cuDeviceGetGraphMemAttribute)           \
  X(cuGraphGetNodes)                        \
  X(cuGraphNodeGetType)                     \
  X(cuGraphMemAllocNodeGetParams)           \
  X(cuGraphChildGraphNodeGetGraph)          \
  X(cuDeviceGetMemPool)                     \
  X(cuMemPoolGetAttribute)

namespace egpu::shim {

#define EGPU_AS_ENUM(name) name,
enum class RealId : int {
  EGPU_WRAPPED_FUNCTIONS(EGPU_AS_ENUM) kFirstHelper,
  kHelperBase = kFirstHelper - 1,
  EGPU_HELPER_FUNCTIONS(EGPU_AS_ENUM) kCount
};
#undef EGPU_AS_ENUM

inline constexpr int kWrappedCount = static_cast<int>(RealId::kFirstHelper);

const char* real_name(RealId id);

namespace detail {
// Resolved functions; kMissingReal marks a symbol the driver does not have.
extern std::atomic<void*> g_real[static_cast<int>(RealId::kCount)];
inline void* const kMissingReal = reinterpret_cast<void*>(uintptr_t{1});
void* resolve_real(RealId id);
}  // namespace detail

// The real function, or null when the driver or the symbol is missing.
inline void* real_function(RealId id) {
  void* fn = detail::g_real[static_cast<int>(id)].load(std::memory_order_acquire);
  if (fn != nullptr && fn != detail::kMissingReal) return fn;
  return detail::resolve_real(id);
}
// What a wrapper returns when its real function is missing.
CUresult missing_real_result();

}  // namespace egpu::shim

// The real `name`, typed like the declaration in cuda.h (null if missing).
#define EGPU_REAL(name) \
  (reinterpret_cast<decltype(&::name)>(::egpu::shim::real_function(::egpu::shim::RealId::name)))

// A wrapper's first line: `real` is the real `name`, or the wrapper returns
// missing_real_result() when the driver has none.
#define EGPU_REAL_OR_RETURN(name)    \
  const auto real = EGPU_REAL(name); \
  if (real == nullptr) return ::egpu::shim::missing_real_result()
