// Memory copies and sets as timed ops: their device time is bytes divided by
// a bandwidth (H100-like: 25 GB/s over PCIe, 1.5 TB/s device to device,
// 2 TB/s memset). No data moves: device memory has no backing store and host
// buffers are left untouched.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "driver/streams.h"

namespace egpu::simgpu::driver {

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost, kMemset };

uint64_t copy_duration_ns(uint64_t bytes, CopyKind kind);

// Which way a copy between two unified addresses goes.
CopyKind kind_between(uint64_t dst, uint64_t src);
CopyKind kind_of_memory_types(CUmemorytype dst, CUmemorytype src, uint64_t dst_address,
                              uint64_t src_address);

// Queues the copy on the stream; a synchronous copy also waits for it.
CUresult timed_copy(CUstream stream, DefaultStream default_stream, uint64_t bytes, CopyKind kind,
                    bool synchronous);

}  // namespace egpu::simgpu::driver
