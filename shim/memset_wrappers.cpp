// The memset family: each queues device work (a GPU may run it as a kernel,
// on its SMs), so it passes the gate and is paced and charged like a launch
// on its stream; synchronous ones go on the NULL stream (_ptds: the calling
// thread's). Before, memsets reached the driver untouched and ran beside the
// slice holder, charged to nobody.
#include "shim/launch_path.h"

using egpu::shim::DefaultStream;
using egpu::shim::paced_launch;
using egpu::shim::RealId;

namespace {

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

}  // namespace

extern "C" {

CUresult CUDAAPI cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N) {
  EGPU_REAL_OR_RETURN(cuMemsetD8);
  return paced_launch(RealId::cuMemsetD8, nullptr, kLegacy, [&] { return real(dstDevice, uc, N); });
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  EGPU_REAL_OR_RETURN(cuMemsetD8_v2);
  return paced_launch(RealId::cuMemsetD8_v2, nullptr, kLegacy,
                      [&] { return real(dstDevice, uc, N); });
}

CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  EGPU_REAL_OR_RETURN(cuMemsetD8_v2_ptds);
  return paced_launch(RealId::cuMemsetD8_v2_ptds, nullptr, kPerThread,
                      [&] { return real(dstDevice, uc, N); });
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD8Async);
  return paced_launch(RealId::cuMemsetD8Async, hStream, kLegacy,
                      [&] { return real(dstDevice, uc, N, hStream); });
}

CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                      CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD8Async_ptsz);
  return paced_launch(RealId::cuMemsetD8Async_ptsz, hStream, kPerThread,
                      [&] { return real(dstDevice, uc, N, hStream); });
}

CUresult CUDAAPI cuMemsetD16(CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N) {
  EGPU_REAL_OR_RETURN(cuMemsetD16);
  return paced_launch(RealId::cuMemsetD16, nullptr, kLegacy,
                      [&] { return real(dstDevice, us, N); });
}

CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  EGPU_REAL_OR_RETURN(cuMemsetD16_v2);
  return paced_launch(RealId::cuMemsetD16_v2, nullptr, kLegacy,
                      [&] { return real(dstDevice, us, N); });
}

CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  EGPU_REAL_OR_RETURN(cuMemsetD16_v2_ptds);
  return paced_launch(RealId::cuMemsetD16_v2_ptds, nullptr, kPerThread,
                      [&] { return real(dstDevice, us, N); });
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                  CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD16Async);
  return paced_launch(RealId::cuMemsetD16Async, hStream, kLegacy,
                      [&] { return real(dstDevice, us, N, hStream); });
}

CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                       CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD16Async_ptsz);
  return paced_launch(RealId::cuMemsetD16Async_ptsz, hStream, kPerThread,
                      [&] { return real(dstDevice, us, N, hStream); });
}

CUresult CUDAAPI cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N) {
  EGPU_REAL_OR_RETURN(cuMemsetD32);
  return paced_launch(RealId::cuMemsetD32, nullptr, kLegacy,
                      [&] { return real(dstDevice, ui, N); });
}

CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  EGPU_REAL_OR_RETURN(cuMemsetD32_v2);
  return paced_launch(RealId::cuMemsetD32_v2, nullptr, kLegacy,
                      [&] { return real(dstDevice, ui, N); });
}

CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  EGPU_REAL_OR_RETURN(cuMemsetD32_v2_ptds);
  return paced_launch(RealId::cuMemsetD32_v2_ptds, nullptr, kPerThread,
                      [&] { return real(dstDevice, ui, N); });
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD32Async);
  return paced_launch(RealId::cuMemsetD32Async, hStream, kLegacy,
                      [&] { return real(dstDevice, ui, N, hStream); });
}

CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                       CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD32Async_ptsz);
  return paced_launch(RealId::cuMemsetD32Async_ptsz, hStream, kPerThread,
                      [&] { return real(dstDevice, ui, N, hStream); });
}

CUresult CUDAAPI cuMemsetD2D8(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned char uc,
                              unsigned int Width, unsigned int Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D8);
  return paced_launch(RealId::cuMemsetD2D8, nullptr, kLegacy,
                      [&] { return real(dstDevice, dstPitch, uc, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                 size_t Width, size_t Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D8_v2);
  return paced_launch(RealId::cuMemsetD2D8_v2, nullptr, kLegacy,
                      [&] { return real(dstDevice, dstPitch, uc, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                      size_t Width, size_t Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D8_v2_ptds);
  return paced_launch(RealId::cuMemsetD2D8_v2_ptds, nullptr, kPerThread,
                      [&] { return real(dstDevice, dstPitch, uc, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                   size_t Width, size_t Height, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D8Async);
  return paced_launch(RealId::cuMemsetD2D8Async, hStream, kLegacy,
                      [&] { return real(dstDevice, dstPitch, uc, Width, Height, hStream); });
}

CUresult CUDAAPI cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                        size_t Width, size_t Height, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D8Async_ptsz);
  return paced_launch(RealId::cuMemsetD2D8Async_ptsz, hStream, kPerThread,
                      [&] { return real(dstDevice, dstPitch, uc, Width, Height, hStream); });
}

CUresult CUDAAPI cuMemsetD2D16(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned short us,
                               unsigned int Width, unsigned int Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D16);
  return paced_launch(RealId::cuMemsetD2D16, nullptr, kLegacy,
                      [&] { return real(dstDevice, dstPitch, us, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                  size_t Width, size_t Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D16_v2);
  return paced_launch(RealId::cuMemsetD2D16_v2, nullptr, kLegacy,
                      [&] { return real(dstDevice, dstPitch, us, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                       size_t Width, size_t Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D16_v2_ptds);
  return paced_launch(RealId::cuMemsetD2D16_v2_ptds, nullptr, kPerThread,
                      [&] { return real(dstDevice, dstPitch, us, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                    size_t Width, size_t Height, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D16Async);
  return paced_launch(RealId::cuMemsetD2D16Async, hStream, kLegacy,
                      [&] { return real(dstDevice, dstPitch, us, Width, Height, hStream); });
}

CUresult CUDAAPI cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                         size_t Width, size_t Height, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D16Async_ptsz);
  return paced_launch(RealId::cuMemsetD2D16Async_ptsz, hStream, kPerThread,
                      [&] { return real(dstDevice, dstPitch, us, Width, Height, hStream); });
}

CUresult CUDAAPI cuMemsetD2D32(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned int ui,
                               unsigned int Width, unsigned int Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D32);
  return paced_launch(RealId::cuMemsetD2D32, nullptr, kLegacy,
                      [&] { return real(dstDevice, dstPitch, ui, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                  size_t Width, size_t Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D32_v2);
  return paced_launch(RealId::cuMemsetD2D32_v2, nullptr, kLegacy,
                      [&] { return real(dstDevice, dstPitch, ui, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                       size_t Width, size_t Height) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D32_v2_ptds);
  return paced_launch(RealId::cuMemsetD2D32_v2_ptds, nullptr, kPerThread,
                      [&] { return real(dstDevice, dstPitch, ui, Width, Height); });
}

CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                    size_t Width, size_t Height, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D32Async);
  return paced_launch(RealId::cuMemsetD2D32Async, hStream, kLegacy,
                      [&] { return real(dstDevice, dstPitch, ui, Width, Height, hStream); });
}

CUresult CUDAAPI cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                         size_t Width, size_t Height, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuMemsetD2D32Async_ptsz);
  return paced_launch(RealId::cuMemsetD2D32Async_ptsz, hStream, kPerThread,
                      [&] { return real(dstDevice, dstPitch, ui, Width, Height, hStream); });
}

}  // extern "C"
