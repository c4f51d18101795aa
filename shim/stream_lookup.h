// Finding the pacing chain of the stream a call names. Stream 0 means the
// legacy default stream for the plain ABI names and the calling thread's
// per-thread default stream for the _ptsz/_ptds ones; CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD say so explicitly. A small per-thread cache keeps the
// lookup off the map lock.
#pragma once

#include <cstdint>

#include "core/pacing/stream_pacer.h"
#include "shim/cuda_api.h"
#include "shim/gpu_binding.h"

namespace egpu::shim {

enum class DefaultStream { kLegacy, kPerThread };

// The chain of `stream` on `b`, created on first use; null when the binding's
// table is full (the launch then goes unpaced).
pacing::StreamPacer* find_stream_pacer(GpuBinding& b, CUstream stream, DefaultStream zero_means);
// Forgets `stream` on `b` (destroyed): returns what it still had to charge.
pacing::Charge retire_stream(GpuBinding& b, CUstream stream);
// Identifies the calling thread to the pacer (who may record on a per-thread
// default stream).
uint64_t thread_token();

}  // namespace egpu::shim
