// The memset family: each queues device work (a GPU may run it as a kernel,
// on its SMs), so it passes the gate and is paced and charged like a launch
// on its stream; synchronous ones go on the NULL stream (_ptds: the calling
// thread's).
#include "shim/launch_path.h"

using egpu::shim::DefaultStream;
using egpu::shim::paced_launch;
using egpu::shim::RealId;

// One wrapper: NAME(PARAMS) is paced as a launch on STREAM, where a null
// stream means KIND's default stream, and calls the real NAME(ARGS).
#define EGPU_MEMSET_WRAPPER(NAME, STREAM, KIND, PARAMS, ARGS)                                  \
  CUresult CUDAAPI NAME PARAMS {                                                               \
    EGPU_REAL_OR_RETURN(NAME);                                                                 \
    return paced_launch(RealId::NAME, STREAM, DefaultStream::KIND, [&] { return real ARGS; }); \
  }

// The five ABI names of one memset: v1 (32-bit sizes), v2, v2 on the
// per-thread default stream, Async and Async_ptsz. V1 and V2 are the
// parameter lists of the synchronous calls; ARGS their arguments.
#define EGPU_MEMSET_FAMILY(API, V1, V2, ARGS)                                       \
  EGPU_MEMSET_WRAPPER(API, nullptr, kLegacy, V1, ARGS)                              \
  EGPU_MEMSET_WRAPPER(API##_v2, nullptr, kLegacy, V2, ARGS)                         \
  EGPU_MEMSET_WRAPPER(API##_v2_ptds, nullptr, kPerThread, V2, ARGS)                 \
  EGPU_MEMSET_WRAPPER(API##Async, hStream, kLegacy, (EGPU_ASYNC_PARAMS V2),         \
                      (EGPU_ASYNC_ARGS ARGS))                                       \
  EGPU_MEMSET_WRAPPER(API##Async_ptsz, hStream, kPerThread, (EGPU_ASYNC_PARAMS V2), \
                      (EGPU_ASYNC_ARGS ARGS))

// (p1, ..., pn) -> p1, ..., pn, CUstream hStream: the Async variants' lists.
#define EGPU_ASYNC_PARAMS(...) __VA_ARGS__, CUstream hStream
#define EGPU_ASYNC_ARGS(...) __VA_ARGS__, hStream

extern "C" {

// clang-format off
EGPU_MEMSET_FAMILY(cuMemsetD8,
                   (CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N),
                   (CUdeviceptr dstDevice, unsigned char uc, size_t N),
                   (dstDevice, uc, N))
EGPU_MEMSET_FAMILY(cuMemsetD16,
                   (CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N),
                   (CUdeviceptr dstDevice, unsigned short us, size_t N),
                   (dstDevice, us, N))
EGPU_MEMSET_FAMILY(cuMemsetD32,
                   (CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N),
                   (CUdeviceptr dstDevice, unsigned int ui, size_t N),
                   (dstDevice, ui, N))
EGPU_MEMSET_FAMILY(cuMemsetD2D8,
                   (CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned char uc,
                    unsigned int Width, unsigned int Height),
                   (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                    size_t Height),
                   (dstDevice, dstPitch, uc, Width, Height))
EGPU_MEMSET_FAMILY(cuMemsetD2D16,
                   (CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned short us,
                    unsigned int Width, unsigned int Height),
                   (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                    size_t Height),
                   (dstDevice, dstPitch, us, Width, Height))
EGPU_MEMSET_FAMILY(cuMemsetD2D32,
                   (CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned int ui,
                    unsigned int Width, unsigned int Height),
                   (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                    size_t Height),
                   (dstDevice, dstPitch, ui, Width, Height))
// clang-format on

}  // extern "C"
