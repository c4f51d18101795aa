// Synchronising entry points: a process blocked in one is still asking for the
// GPU, and its streams' device time is measured across them.
#include "shim/pool_memory.h"
#include "shim/sync_path.h"

using egpu::shim::DefaultStream;
using egpu::shim::device_scope;
using egpu::shim::paced_sync;
using egpu::shim::RealId;
using egpu::shim::stream_scope;

namespace {

// A synchronisation is where memory pools give back what is above their
// release thresholds: their charges follow (pool_memory.h).
CUresult synced(CUresult rc) noexcept {
  egpu::shim::settle_mem_pools();
  return rc;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuCtxSynchronize(void) {
  EGPU_REAL_OR_RETURN(cuCtxSynchronize);
  return paced_sync(RealId::cuCtxSynchronize, device_scope(), [&] { return synced(real()); });
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  EGPU_REAL_OR_RETURN(cuCtxSynchronize_v2);
  return paced_sync(RealId::cuCtxSynchronize_v2, device_scope(), [&] { return synced(real(ctx)); });
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuStreamSynchronize);
  return paced_sync(RealId::cuStreamSynchronize, stream_scope(hStream, DefaultStream::kLegacy),
                    [&] { return synced(real(hStream)); });
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuStreamSynchronize_ptsz);
  return paced_sync(RealId::cuStreamSynchronize_ptsz,
                    stream_scope(hStream, DefaultStream::kPerThread),
                    [&] { return synced(real(hStream)); });
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  EGPU_REAL_OR_RETURN(cuEventSynchronize);
  return paced_sync(RealId::cuEventSynchronize, device_scope(),
                    [&] { return synced(real(hEvent)); });
}

// Synchronous copies wait for the device like a synchronize does.
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void* srcHost,
                              unsigned int ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyHtoD);
  return paced_sync(RealId::cuMemcpyHtoD, device_scope(),
                    [&] { return real(dstDevice, srcHost, ByteCount); });
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyHtoD_v2);
  return paced_sync(RealId::cuMemcpyHtoD_v2, device_scope(),
                    [&] { return real(dstDevice, srcHost, ByteCount); });
}

CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost,
                                      size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyHtoD_v2_ptds);
  return paced_sync(RealId::cuMemcpyHtoD_v2_ptds, device_scope(),
                    [&] { return real(dstDevice, srcHost, ByteCount); });
}

CUresult CUDAAPI cuMemcpyDtoH(void* dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyDtoH);
  return paced_sync(RealId::cuMemcpyDtoH, device_scope(),
                    [&] { return real(dstHost, srcDevice, ByteCount); });
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyDtoH_v2);
  return paced_sync(RealId::cuMemcpyDtoH_v2, device_scope(),
                    [&] { return real(dstHost, srcDevice, ByteCount); });
}

CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyDtoH_v2_ptds);
  return paced_sync(RealId::cuMemcpyDtoH_v2_ptds, device_scope(),
                    [&] { return real(dstHost, srcDevice, ByteCount); });
}

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                              unsigned int ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyDtoD);
  return paced_sync(RealId::cuMemcpyDtoD, device_scope(),
                    [&] { return real(dstDevice, srcDevice, ByteCount); });
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyDtoD_v2);
  return paced_sync(RealId::cuMemcpyDtoD_v2, device_scope(),
                    [&] { return real(dstDevice, srcDevice, ByteCount); });
}

CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpyDtoD_v2_ptds);
  return paced_sync(RealId::cuMemcpyDtoD_v2_ptds, device_scope(),
                    [&] { return real(dstDevice, srcDevice, ByteCount); });
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpy);
  return paced_sync(RealId::cuMemcpy, device_scope(), [&] { return real(dst, src, ByteCount); });
}

CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  EGPU_REAL_OR_RETURN(cuMemcpy_ptds);
  return paced_sync(RealId::cuMemcpy_ptds, device_scope(),
                    [&] { return real(dst, src, ByteCount); });
}

}  // extern "C"
