#include "driver/streams.h"

#include <memory>
#include <unordered_map>

#include "driver/contexts.h"
#include "driver/driver_state.h"

namespace egpu::simgpu::driver {
namespace {

// This thread's default stream per context (keyed by the never-reused id).
thread_local std::unordered_map<uint64_t, std::unique_ptr<CUstream_st>> t_per_thread_streams;

CUstream_st* per_thread_stream(CUctx_st* ctx) {
  auto& slot = t_per_thread_streams[ctx->id];
  if (!slot) {
    slot = std::make_unique<CUstream_st>();
    slot->ctx = ctx;
    slot->per_thread = true;
    slot->id = Driver::get().next_id();
    slot->tag = static_cast<uint32_t>(slot->id);
  }
  return slot.get();
}

}  // namespace

CUresult resolve_stream(CUstream handle, DefaultStream default_stream, CUstream_st** out) {
  if (handle == nullptr) {
    handle = default_stream == DefaultStream::kPerThread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  }
  if (handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    CUctx_st* ctx = nullptr;
    if (const CUresult rc = require_current(&ctx); rc != CUDA_SUCCESS) return rc;
    *out = handle == CU_STREAM_LEGACY ? ctx->legacy_stream.get() : per_thread_stream(ctx);
    return CUDA_SUCCESS;
  }
  CUstream_st* stream = registry().find<CUstream_st>(handle);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *out = stream;
  return CUDA_SUCCESS;
}

uint64_t stream_sync_seq(const CUstream_st* stream) {
  if (stream->legacy) return stream->ctx->last_seq.load(std::memory_order_relaxed);
  return stream->last_seq.load(std::memory_order_relaxed);
}

}  // namespace egpu::simgpu::driver
