// Streams and contexts ending: their pacing state must go with them (a
// destroyed context's events are invalid, and its handles may be reused), and
// the memory the driver frees with a context goes back to the quota.
#include "shim/call_counters.h"
#include "shim/capture_state.h"
#include "shim/context_devices.h"
#include "shim/context_limits.h"
#include "shim/graph_memory.h"
#include "shim/launch_admission.h"
#include "shim/log.h"
#include "shim/memory_accounting.h"
#include "shim/no_cancel_scope.h"
#include "shim/pool_memory.h"
#include "shim/process_state.h"
#include "shim/stream_lookup.h"

namespace egpu::shim {
namespace {

// Charges what the stream still had queued and forgets it, on every managed GPU
// (a stream handle is unique in the process).
void forget_stream(CUstream stream) noexcept {
  ProcessState* s = managed_state();
  if (s == nullptr) return;
  try {
    for (int i = 0;; ++i) {
      GpuBinding* b = s->binding(i);
      if (b == nullptr) break;
      const pacing::Charge left = retire_stream(*b, stream);
      if (Attachment* a = b->attachment()) add_charge(*a, left);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error while forgetting a stream");
  }
}

// A context is going away: forget the events of `ordinal` (-1: every device)
// without touching them.
void forget_context(int ordinal) noexcept {
  ProcessState* s = managed_state();
  if (s == nullptr) return;
  try {
    s->contexts().invalidate();
    for (int i = 0;; ++i) {
      GpuBinding* b = s->binding(i);
      if (b == nullptr) break;
      if (ordinal < 0 || ordinal == i) b->pacer().abandon_all();
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error while forgetting a context");
  }
}

// After a successful release: false only if the driver says the primary
// context is gone (a release that was not the last reference frees nothing).
bool primary_still_active(CUdevice dev) noexcept {
  const auto state = EGPU_REAL(cuDevicePrimaryCtxGetState);
  unsigned int flags = 0;
  int active = 1;
  return state == nullptr || state(dev, &flags, &active) != CUDA_SUCCESS || active != 0;
}

template <typename RealDestroy>
CUresult destroy_context(CUcontext ctx, RealDestroy&& real) noexcept {
  const NoCancelScope no_cancel;  // the driver may wait here (see NoCancelScope)
  forget_context(-1);
  const CUresult result = real();
  if (result == CUDA_SUCCESS) {
    capture_state().forget_context(ctx);  // its streams' captures went with it
    release_context_limits(ctx);
    release_context_allocations(reinterpret_cast<uintptr_t>(ctx));
    settle_graph_pools();  // a graph pool may have gone with it
    settle_mem_pools();
  }
  return result;
}

// cuDevicePrimaryCtxReset (`reset`) or cuDevicePrimaryCtxRelease.
template <typename RealEnd>
CUresult end_primary(CUdevice dev, bool reset, RealEnd&& real) noexcept {
  const NoCancelScope no_cancel;  // the driver may wait here (see NoCancelScope)
  // Its handle now: once it is gone the driver no longer says which it was.
  const CUcontext primary = managed_state() != nullptr ? active_primary(dev) : nullptr;
  forget_context(dev);
  const CUresult result = real();
  if (result != CUDA_SUCCESS) return result;
  release_primary_limits(dev, reset);
  settle_graph_pool(dev);
  settle_mem_pools();
  if (reset || !primary_still_active(dev)) end_destroyed_pools(dev);
  if (primary != nullptr && (reset || !primary_still_active(dev))) {
    capture_state().forget_context(primary);
    release_context_allocations(reinterpret_cast<uintptr_t>(primary));
  }
  return result;
}

}  // namespace
}  // namespace egpu::shim

using egpu::shim::note_call;
using egpu::shim::RealId;

extern "C" {

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuStreamDestroy);
  note_call(RealId::cuStreamDestroy);
  egpu::shim::forget_stream(hStream);
  egpu::shim::capture_state().forget(hStream);
  return real(hStream);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuStreamDestroy_v2);
  note_call(RealId::cuStreamDestroy_v2);
  egpu::shim::forget_stream(hStream);
  egpu::shim::capture_state().forget(hStream);
  return real(hStream);
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  EGPU_REAL_OR_RETURN(cuCtxDestroy);
  note_call(RealId::cuCtxDestroy);
  return egpu::shim::destroy_context(ctx, [&] { return real(ctx); });
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  EGPU_REAL_OR_RETURN(cuCtxDestroy_v2);
  note_call(RealId::cuCtxDestroy_v2);
  return egpu::shim::destroy_context(ctx, [&] { return real(ctx); });
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  EGPU_REAL_OR_RETURN(cuDevicePrimaryCtxReset);
  note_call(RealId::cuDevicePrimaryCtxReset);
  return egpu::shim::end_primary(dev, true, [&] { return real(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  EGPU_REAL_OR_RETURN(cuDevicePrimaryCtxReset_v2);
  note_call(RealId::cuDevicePrimaryCtxReset_v2);
  return egpu::shim::end_primary(dev, true, [&] { return real(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  EGPU_REAL_OR_RETURN(cuDevicePrimaryCtxRelease);
  note_call(RealId::cuDevicePrimaryCtxRelease);
  return egpu::shim::end_primary(dev, false, [&] { return real(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  EGPU_REAL_OR_RETURN(cuDevicePrimaryCtxRelease_v2);
  note_call(RealId::cuDevicePrimaryCtxRelease_v2);
  return egpu::shim::end_primary(dev, false, [&] { return real(dev); });
}

}  // extern "C"
