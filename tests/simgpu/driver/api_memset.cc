// The memset family as timed ops (see copies.h). Synchronous sets go on the
// NULL stream (_ptds: the per-thread stream) and return when done.
#include "driver/cuda_api.h"
// after cuda.h:
#include "driver/copies.h"

using egpu::simgpu::driver::CopyKind;
using egpu::simgpu::driver::DefaultStream;
using egpu::simgpu::driver::guarded;
namespace drv = egpu::simgpu::driver;

namespace {

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

CUresult set_sync(uint64_t bytes, DefaultStream ds) {
  return guarded([&] { return drv::timed_copy(nullptr, ds, bytes, CopyKind::kMemset, true); });
}

CUresult set_async(CUstream stream, uint64_t bytes, DefaultStream ds) {
  return guarded([&] { return drv::timed_copy(stream, ds, bytes, CopyKind::kMemset, false); });
}

}  // namespace

extern "C" {

CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t n) {
  return set_sync(n, kLegacy);
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr, unsigned char, size_t n) {
  return set_sync(n, kPerThread);
}
CUresult cuMemsetD16_v2(CUdeviceptr, unsigned short, size_t n) {
  return set_sync(2 * n, kLegacy);
}
CUresult cuMemsetD16_v2_ptds(CUdeviceptr, unsigned short, size_t n) {
  return set_sync(2 * n, kPerThread);
}
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned int, size_t n) {
  return set_sync(4 * n, kLegacy);
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr, unsigned int, size_t n) {
  return set_sync(4 * n, kPerThread);
}

CUresult cuMemsetD2D8_v2(CUdeviceptr, size_t, unsigned char, size_t w, size_t h) {
  return set_sync(w * h, kLegacy);
}
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr, size_t, unsigned char, size_t w, size_t h) {
  return set_sync(w * h, kPerThread);
}
CUresult cuMemsetD2D16_v2(CUdeviceptr, size_t, unsigned short, size_t w, size_t h) {
  return set_sync(2 * w * h, kLegacy);
}
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr, size_t, unsigned short, size_t w, size_t h) {
  return set_sync(2 * w * h, kPerThread);
}
CUresult cuMemsetD2D32_v2(CUdeviceptr, size_t, unsigned int, size_t w, size_t h) {
  return set_sync(4 * w * h, kLegacy);
}
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr, size_t, unsigned int, size_t w, size_t h) {
  return set_sync(4 * w * h, kPerThread);
}

CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t n, CUstream s) {
  return set_async(s, n, kLegacy);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t n, CUstream s) {
  return set_async(s, n, kPerThread);
}
CUresult cuMemsetD16Async(CUdeviceptr, unsigned short, size_t n, CUstream s) {
  return set_async(s, 2 * n, kLegacy);
}
CUresult cuMemsetD16Async_ptsz(CUdeviceptr, unsigned short, size_t n, CUstream s) {
  return set_async(s, 2 * n, kPerThread);
}
CUresult cuMemsetD32Async(CUdeviceptr, unsigned int, size_t n, CUstream s) {
  return set_async(s, 4 * n, kLegacy);
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr, unsigned int, size_t n, CUstream s) {
  return set_async(s, 4 * n, kPerThread);
}
CUresult cuMemsetD2D8Async(CUdeviceptr, size_t, unsigned char, size_t w, size_t h, CUstream s) {
  return set_async(s, w * h, kLegacy);
}
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr, size_t, unsigned char, size_t w, size_t h,
                                CUstream s) {
  return set_async(s, w * h, kPerThread);
}
CUresult cuMemsetD2D16Async(CUdeviceptr, size_t, unsigned short, size_t w, size_t h, CUstream s) {
  return set_async(s, 2 * w * h, kLegacy);
}
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr, size_t, unsigned short, size_t w, size_t h,
                                 CUstream s) {
  return set_async(s, 2 * w * h, kPerThread);
}
CUresult cuMemsetD2D32Async(CUdeviceptr, size_t, unsigned int, size_t w, size_t h, CUstream s) {
  return set_async(s, 4 * w * h, kLegacy);
}
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr, size_t, unsigned int, size_t w, size_t h,
                                 CUstream s) {
  return set_async(s, 4 * w * h, kPerThread);
}

}  // extern "C"
