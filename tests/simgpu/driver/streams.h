// Resolving the stream argument of an API call: NULL means the legacy stream
// of the current context, or the thread's per-thread default stream for the
// _ptsz/_ptds entry points; CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name
// them explicitly. All streams of a context share its one queue (the device
// executes a context's work in order); a stream tracks its last op.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include "driver/handles.h"

namespace egpu::simgpu::driver {

enum class DefaultStream { kLegacy, kPerThread };

CUresult resolve_stream(CUstream handle, DefaultStream default_stream, CUstream_st** out);

// The sequence number a synchronize on this stream must wait for. The legacy
// stream synchronises with all work of its context.
uint64_t stream_sync_seq(const CUstream_st* stream);

}  // namespace egpu::simgpu::driver
