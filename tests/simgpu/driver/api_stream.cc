// Streams. All streams of a context feed its one device queue; a stream
// remembers its last op so that synchronize/query wait for just that.
#include "driver/cuda_api.h"
// after cuda.h:
#include <algorithm>
#include <memory>

#include "driver/contexts.h"
#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/pool_cache.h"
#include "driver/streams.h"

using egpu::simgpu::driver::DefaultStream;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

CUresult create_stream(CUstream* out, unsigned int flags, int priority) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  auto stream = std::make_unique<CUstream_st>();
  stream->ctx = ctx;
  stream->owner_ctx = ctx;
  stream->flags = flags;
  stream->priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  stream->id = drv::Driver::get().next_id();
  stream->tag = static_cast<uint32_t>(stream->id);
  *out = registry().adopt(std::move(stream));
  return CUDA_SUCCESS;
}

CUresult resolve(CUstream handle, DefaultStream default_stream, CUstream_st** stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  return drv::resolve_stream(handle, default_stream, stream);
}

CUresult synchronize(CUstream handle, DefaultStream default_stream) {
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  if (stream->capture_graph != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return drv::wait_for_seq(stream->ctx, drv::stream_sync_seq(stream));
}

CUresult query(CUstream handle, DefaultStream default_stream) {
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  if (stream->capture_graph != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return drv::query_seq(stream->ctx, drv::stream_sync_seq(stream));
}

// Same context: its queue is in order already. Same device: a wait op in the
// queue. Another device: the host waits for the event (a simplification).
CUresult wait_event(CUstream handle, CUevent event_handle, DefaultStream default_stream) {
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  CUevent_st* event = registry().find<CUevent_st>(event_handle);
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t seq = event->recorded_seq.load();
  if (seq == 0 || stream->capture_graph != nullptr || event->ctx == stream->ctx) {
    return CUDA_SUCCESS;
  }
  if (event->ctx->physical != stream->ctx->physical) return drv::wait_for_seq(event->ctx, seq);
  drv::SubmitRequest request;
  request.kind = egpu::simgpu::OpKind::kWait;
  request.ref_slot = event->ctx->slot;
  request.ref_generation = event->ctx->generation;
  request.wait_seq = seq;
  return drv::submit(stream, request, nullptr);
}

CUresult get_priority(CUstream handle, int* priority, DefaultStream default_stream) {
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  *priority = stream->priority;
  return CUDA_SUCCESS;
}

CUresult get_flags(CUstream handle, unsigned int* flags, DefaultStream default_stream) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  *flags = stream->flags;
  return CUDA_SUCCESS;
}

CUresult get_ctx(CUstream handle, CUcontext* pctx, DefaultStream default_stream) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  *pctx = stream->ctx;
  return CUDA_SUCCESS;
}

CUresult get_id(CUstream handle, unsigned long long* id, DefaultStream default_stream) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  *id = stream->legacy ? 0 : stream->id;
  return CUDA_SUCCESS;
}

CUresult get_device(CUstream handle, CUdevice* device, DefaultStream default_stream) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = resolve(handle, default_stream, &stream); rc != CUDA_SUCCESS) return rc;
  *device = stream->ctx->ordinal;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return guarded([&] { return create_stream(phStream, Flags, kLeastPriority); });
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  return guarded([&] { return create_stream(phStream, flags, priority); });
}

// Work already queued still runs, as on a real device.
CUresult cuStreamDestroy_v2(CUstream hStream) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (registry().find<CUstream_st>(hStream) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    registry().destroy(hStream);
    return CUDA_SUCCESS;
  });
}

CUresult cuStreamDestroy(CUstream hStream) {
  return cuStreamDestroy_v2(hStream);
}

CUresult cuStreamSynchronize(CUstream hStream) {
  return guarded([&] {
    const CUresult rc = synchronize(hStream, DefaultStream::kLegacy);
    drv::release_pool_excess();  // pools give back what is above their thresholds
    return rc;
  });
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  return guarded([&] {
    const CUresult rc = synchronize(hStream, DefaultStream::kPerThread);
    drv::release_pool_excess();  // pools give back what is above their thresholds
    return rc;
  });
}

CUresult cuStreamQuery(CUstream hStream) {
  return guarded([&] { return query(hStream, DefaultStream::kLegacy); });
}

CUresult cuStreamQuery_ptsz(CUstream hStream) {
  return guarded([&] { return query(hStream, DefaultStream::kPerThread); });
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  (void)Flags;
  return guarded([&] { return wait_event(hStream, hEvent, DefaultStream::kLegacy); });
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  (void)Flags;
  return guarded([&] { return wait_event(hStream, hEvent, DefaultStream::kPerThread); });
}

CUresult cuStreamGetPriority(CUstream hStream, int* priority) {
  return guarded([&] { return get_priority(hStream, priority, DefaultStream::kLegacy); });
}

CUresult cuStreamGetPriority_ptsz(CUstream hStream, int* priority) {
  return guarded([&] { return get_priority(hStream, priority, DefaultStream::kPerThread); });
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  return guarded([&] { return get_flags(hStream, flags, DefaultStream::kLegacy); });
}

CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags) {
  return guarded([&] { return get_flags(hStream, flags, DefaultStream::kPerThread); });
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  return guarded([&] { return get_ctx(hStream, pctx, DefaultStream::kLegacy); });
}

CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx) {
  return guarded([&] { return get_ctx(hStream, pctx, DefaultStream::kPerThread); });
}

CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  if (pGreenCtx != nullptr) *pGreenCtx = nullptr;  // no green contexts here
  return guarded([&] { return get_ctx(hStream, pCtx, DefaultStream::kLegacy); });
}

CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  if (pGreenCtx != nullptr) *pGreenCtx = nullptr;
  return guarded([&] { return get_ctx(hStream, pCtx, DefaultStream::kPerThread); });
}

CUresult cuStreamGetId(CUstream hStream, unsigned long long* streamId) {
  return guarded([&] { return get_id(hStream, streamId, DefaultStream::kLegacy); });
}

CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long* streamId) {
  return guarded([&] { return get_id(hStream, streamId, DefaultStream::kPerThread); });
}

CUresult cuStreamGetDevice(CUstream hStream, CUdevice* device) {
  return guarded([&] { return get_device(hStream, device, DefaultStream::kLegacy); });
}

CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice* device) {
  return guarded([&] { return get_device(hStream, device, DefaultStream::kPerThread); });
}

}  // extern "C"
