// Events: a record op in the context's queue stamps the device time at which
// it completes, so elapsed times are device time.
#include "driver/cuda_api.h"
// after cuda.h:
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

CUresult record(CUevent handle, CUstream stream_handle, DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUevent_st* event = registry().find<CUevent_st>(handle);
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(stream_handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  if (stream->ctx != event->ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture_graph != nullptr) return CUDA_SUCCESS;  // a graph node: nothing to time
  drv::SubmitRequest request;
  request.kind = egpu::simgpu::OpKind::kEventRecord;
  request.ref_slot = event->stamp_slot;
  uint64_t seq = 0;
  const CUresult rc = drv::submit(stream, request, &seq);
  if (rc == CUDA_SUCCESS) event->recorded_seq.store(seq);
  return rc;
}

CUresult destroy(CUevent handle) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUevent_st* event = registry().find<CUevent_st>(handle);
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  drv::release_event_slot(event->ctx, event->stamp_slot);
  registry().destroy(event);
  return CUDA_SUCCESS;
}

CUresult elapsed(float* ms, CUevent start_handle, CUevent end_handle) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUevent_st* start = registry().find<CUevent_st>(start_handle);
  CUevent_st* end = registry().find<CUevent_st>(end_handle);
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) != 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const uint64_t start_seq = start->recorded_seq.load();
  const uint64_t end_seq = end->recorded_seq.load();
  if (start_seq == 0 || end_seq == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (drv::query_seq(start->ctx, start_seq) != CUDA_SUCCESS ||
      drv::query_seq(end->ctx, end_seq) != CUDA_SUCCESS) {
    return CUDA_ERROR_NOT_READY;
  }
  uint64_t t0 = 0;
  uint64_t t1 = 0;
  if (!drv::read_event_stamp(start, start_seq, &t0) || !drv::read_event_stamp(end, end_seq, &t1)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *ms = static_cast<float>((static_cast<double>(t1) - static_cast<double>(t0)) / 1e6);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = nullptr;
    if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
    uint32_t slot = 0;
    if (!drv::allocate_event_slot(ctx, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
    auto event = std::make_unique<CUevent_st>();
    event->ctx = ctx;
    event->owner_ctx = ctx;
    event->flags = Flags;
    event->stamp_slot = slot;
    *phEvent = registry().adopt(std::move(event));
    return CUDA_SUCCESS;
  });
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  return guarded([&] { return record(hEvent, hStream, DefaultStream::kLegacy); });
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  return guarded([&] { return record(hEvent, hStream, DefaultStream::kPerThread); });
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  (void)flags;
  return guarded([&] { return record(hEvent, hStream, DefaultStream::kLegacy); });
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  (void)flags;
  return guarded([&] { return record(hEvent, hStream, DefaultStream::kPerThread); });
}

CUresult cuEventQuery(CUevent hEvent) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUevent_st* event = registry().find<CUevent_st>(hEvent);
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    return drv::query_seq(event->ctx, event->recorded_seq.load());
  });
}

CUresult cuEventSynchronize(CUevent hEvent) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUevent_st* event = registry().find<CUevent_st>(hEvent);
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    const CUresult rc = drv::wait_for_seq(event->ctx, event->recorded_seq.load());
    drv::release_pool_excess();  // pools give back what is above their thresholds
    return rc;
  });
}

CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return guarded([&] { return elapsed(pMilliseconds, hStart, hEnd); });
}

CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return guarded([&] { return elapsed(pMilliseconds, hStart, hEnd); });
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
  return guarded([&] { return destroy(hEvent); });
}

CUresult cuEventDestroy(CUevent hEvent) {
  return guarded([&] { return destroy(hEvent); });
}

}  // extern "C"
