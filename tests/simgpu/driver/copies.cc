#include "driver/copies.h"

#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/graphs.h"
#include "driver/memory_accounting.h"

namespace egpu::simgpu::driver {
namespace {

// Bytes per nanosecond (= GB/s).
constexpr uint64_t kPcieBytesPerNs = 25;
constexpr uint64_t kDeviceCopyBytesPerNs = 1500;
constexpr uint64_t kMemsetBytesPerNs = 2000;

bool on_device(uint64_t address) {
  return device_of_address(address) >= 0;
}

}  // namespace

uint64_t copy_duration_ns(uint64_t bytes, CopyKind kind) {
  switch (kind) {
    case CopyKind::kDeviceToDevice:
      return (bytes + kDeviceCopyBytesPerNs - 1) / kDeviceCopyBytesPerNs;
    case CopyKind::kMemset:
      return (bytes + kMemsetBytesPerNs - 1) / kMemsetBytesPerNs;
    default:
      return (bytes + kPcieBytesPerNs - 1) / kPcieBytesPerNs;
  }
}

CopyKind kind_between(uint64_t dst, uint64_t src) {
  const bool dst_device = on_device(dst);
  const bool src_device = on_device(src);
  if (dst_device && src_device) return CopyKind::kDeviceToDevice;
  if (dst_device) return CopyKind::kHostToDevice;
  if (src_device) return CopyKind::kDeviceToHost;
  return CopyKind::kHostToHost;
}

CopyKind kind_of_memory_types(CUmemorytype dst, CUmemorytype src, uint64_t dst_address,
                              uint64_t src_address) {
  const auto device_side = [](CUmemorytype type, uint64_t address) {
    if (type == CU_MEMORYTYPE_UNIFIED) return on_device(address);
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY;
  };
  const bool dst_device = device_side(dst, dst_address);
  const bool src_device = device_side(src, src_address);
  if (dst_device && src_device) return CopyKind::kDeviceToDevice;
  if (dst_device) return CopyKind::kHostToDevice;
  if (src_device) return CopyKind::kDeviceToHost;
  return CopyKind::kHostToHost;
}

CUresult timed_copy(CUstream handle, DefaultStream default_stream, uint64_t bytes, CopyKind kind,
                    bool synchronous) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve_stream(handle, default_stream, &stream); rc != CUDA_SUCCESS) {
    return rc;
  }
  const uint64_t duration = copy_duration_ns(bytes, kind);
  if (capture_if_capturing(stream, duration)) return CUDA_SUCCESS;
  SubmitRequest request;
  request.kind = OpKind::kCopy;
  request.duration_ns = duration;
  uint64_t seq = 0;
  if (const CUresult rc = submit(stream, request, &seq); rc != CUDA_SUCCESS) return rc;
  return synchronous ? wait_for_seq(stream->ctx, seq) : CUDA_SUCCESS;
}

}  // namespace egpu::simgpu::driver
