// The memcpy family as timed ops (see copies.h). Synchronous copies go on the
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

CUresult copy_sync(uint64_t bytes, CopyKind kind, DefaultStream ds) {
  return guarded([&] { return drv::timed_copy(nullptr, ds, bytes, kind, true); });
}

CUresult copy_async(CUstream stream, uint64_t bytes, CopyKind kind, DefaultStream ds) {
  return guarded([&] { return drv::timed_copy(stream, ds, bytes, kind, false); });
}

uint64_t bytes_2d(const CUDA_MEMCPY2D* p) {
  return uint64_t{p->WidthInBytes} * p->Height;
}

uint64_t bytes_3d(const CUDA_MEMCPY3D* p) {
  return uint64_t{p->WidthInBytes} * p->Height * (p->Depth == 0 ? 1 : p->Depth);
}

uint64_t bytes_3d_peer(const CUDA_MEMCPY3D_PEER* p) {
  return uint64_t{p->WidthInBytes} * p->Height * (p->Depth == 0 ? 1 : p->Depth);
}

template <class Params>
CopyKind kind_of(const Params* p) {
  return drv::kind_of_memory_types(p->dstMemoryType, p->srcMemoryType, p->dstDevice, p->srcDevice);
}

CUresult copy_2d(const CUDA_MEMCPY2D* p, CUstream stream, DefaultStream ds, bool sync) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return sync ? copy_sync(bytes_2d(p), kind_of(p), ds)
              : copy_async(stream, bytes_2d(p), kind_of(p), ds);
}

CUresult copy_3d(const CUDA_MEMCPY3D* p, CUstream stream, DefaultStream ds, bool sync) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return sync ? copy_sync(bytes_3d(p), kind_of(p), ds)
              : copy_async(stream, bytes_3d(p), kind_of(p), ds);
}

CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* p, CUstream stream, DefaultStream ds, bool sync) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return sync ? copy_sync(bytes_3d_peer(p), kind_of(p), ds)
              : copy_async(stream, bytes_3d_peer(p), kind_of(p), ds);
}

}  // namespace

extern "C" {

// Host <-> device, device <-> device.
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*, size_t n) {
  return copy_sync(n, CopyKind::kHostToDevice, kLegacy);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void*, size_t n) {
  return copy_sync(n, CopyKind::kHostToDevice, kPerThread);
}
CUresult cuMemcpyDtoH_v2(void*, CUdeviceptr, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToHost, kLegacy);
}
CUresult cuMemcpyDtoH_v2_ptds(void*, CUdeviceptr, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToHost, kPerThread);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr, CUdeviceptr, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kPerThread);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void*, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kHostToDevice, kLegacy);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void*, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kHostToDevice, kPerThread);
}
CUresult cuMemcpyDtoHAsync_v2(void*, CUdeviceptr, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToHost, kLegacy);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void*, CUdeviceptr, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToHost, kPerThread);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr, CUdeviceptr, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToDevice, kPerThread);
}

// Unified addressing and peers.
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_sync(n, drv::kind_between(dst, src), kLegacy);
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_sync(n, drv::kind_between(dst, src), kPerThread);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_async(s, n, drv::kind_between(dst, src), kLegacy);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_async(s, n, drv::kind_between(dst, src), kPerThread);
}
CUresult cuMemcpyPeer(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyPeer_ptds(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kPerThread);
}
CUresult cuMemcpyPeerAsync(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t n,
                                CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToDevice, kPerThread);
}

// Arrays.
CUresult cuMemcpyHtoA_v2(CUarray, size_t, const void*, size_t n) {
  return copy_sync(n, CopyKind::kHostToDevice, kLegacy);
}
CUresult cuMemcpyHtoA_v2_ptds(CUarray, size_t, const void*, size_t n) {
  return copy_sync(n, CopyKind::kHostToDevice, kPerThread);
}
CUresult cuMemcpyAtoH_v2(void*, CUarray, size_t, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToHost, kLegacy);
}
CUresult cuMemcpyAtoH_v2_ptds(void*, CUarray, size_t, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToHost, kPerThread);
}
CUresult cuMemcpyDtoA_v2(CUarray, size_t, CUdeviceptr, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyDtoA_v2_ptds(CUarray, size_t, CUdeviceptr, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kPerThread);
}
CUresult cuMemcpyAtoD_v2(CUdeviceptr, CUarray, size_t, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr, CUarray, size_t, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kPerThread);
}
CUresult cuMemcpyAtoA_v2(CUarray, size_t, CUarray, size_t, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kLegacy);
}
CUresult cuMemcpyAtoA_v2_ptds(CUarray, size_t, CUarray, size_t, size_t n) {
  return copy_sync(n, CopyKind::kDeviceToDevice, kPerThread);
}
CUresult cuMemcpyHtoAAsync_v2(CUarray, size_t, const void*, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kHostToDevice, kLegacy);
}
CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray, size_t, const void*, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kHostToDevice, kPerThread);
}
CUresult cuMemcpyAtoHAsync_v2(void*, CUarray, size_t, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToHost, kLegacy);
}
CUresult cuMemcpyAtoHAsync_v2_ptsz(void*, CUarray, size_t, size_t n, CUstream s) {
  return copy_async(s, n, CopyKind::kDeviceToHost, kPerThread);
}

// 2D and 3D.
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* p) {
  return copy_2d(p, nullptr, kLegacy, true);
}
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* p) {
  return copy_2d(p, nullptr, kPerThread, true);
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* p) {
  return copy_2d(p, nullptr, kLegacy, true);
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* p) {
  return copy_2d(p, nullptr, kPerThread, true);
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* p, CUstream s) {
  return copy_2d(p, s, kLegacy, false);
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* p, CUstream s) {
  return copy_2d(p, s, kPerThread, false);
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* p) {
  return copy_3d(p, nullptr, kLegacy, true);
}
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* p) {
  return copy_3d(p, nullptr, kPerThread, true);
}
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* p, CUstream s) {
  return copy_3d(p, s, kLegacy, false);
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* p, CUstream s) {
  return copy_3d(p, s, kPerThread, false);
}
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) {
  return copy_3d_peer(p, nullptr, kLegacy, true);
}
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) {
  return copy_3d_peer(p, nullptr, kPerThread, true);
}
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream s) {
  return copy_3d_peer(p, s, kLegacy, false);
}
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream s) {
  return copy_3d_peer(p, s, kPerThread, false);
}

}  // extern "C"
