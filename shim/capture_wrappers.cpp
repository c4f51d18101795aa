// Stream capture (CUDA graphs): the shim learns which streams capture, so
// their launches pass through and its own events stay out of the way
// (capture_state.h). The capture itself is the driver's, unchanged.
#include "shim/after_fork.h"
#include "shim/call_counters.h"
#include "shim/capture_state.h"
#include "shim/fork_renewed.h"
#include "shim/real_functions.h"

using egpu::shim::capture_key;
using egpu::shim::capture_state;
using egpu::shim::note_call;
using egpu::shim::RealId;

namespace egpu::shim {
namespace {

CUstreamCaptureStatus driver_status(CUstream stream) noexcept {
  const auto is_capturing = EGPU_REAL(cuStreamIsCapturing);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing == nullptr || is_capturing(stream, &status) != CUDA_SUCCESS) {
    return CU_STREAM_CAPTURE_STATUS_NONE;
  }
  return status;
}

CUcontext stream_context(CUstream stream) noexcept {
  const auto get_ctx = EGPU_REAL(cuStreamGetCtx);
  CUcontext context = nullptr;
  if (get_ctx == nullptr || get_ctx(stream, &context) != CUDA_SUCCESS) return nullptr;
  return context;
}

CaptureState* make_capture_state() {
  return new CaptureState(&driver_status, &stream_context);
}
// Never destroyed: launches may run while the process exits.
constinit ForkRenewed<CaptureState, &make_capture_state> g_capture_state;

}  // namespace

CaptureState& capture_state() noexcept {
  return g_capture_state.get();
}

void renew_capture_state_after_fork() noexcept {
  g_capture_state.renew();
}

}  // namespace egpu::shim

namespace {

// Registered before the driver opens the capture (no thread may query an
// event from then on), undone if it refused.
template <typename Begin>
CUresult begin_capture(CUstream stream, CUstreamCaptureMode mode, Begin&& real_begin) {
  const auto ticket = capture_state().begin(stream, mode);
  const CUresult rc = real_begin();
  if (rc == CUDA_SUCCESS) {
    capture_state().confirm(ticket);
  } else {
    capture_state().undo(ticket);
  }
  return rc;
}

CUresult ended(CUresult rc, CUstream stream) {
  capture_state().end(stream, rc);
  return rc;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuStreamBeginCapture);
  note_call(RealId::cuStreamBeginCapture);
  return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, [&] { return real(hStream); });
}

CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuStreamBeginCapture_ptsz);
  note_call(RealId::cuStreamBeginCapture_ptsz);
  return begin_capture(capture_key(hStream, true), CU_STREAM_CAPTURE_MODE_GLOBAL,
                       [&] { return real(hStream); });
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  EGPU_REAL_OR_RETURN(cuStreamBeginCapture_v2);
  note_call(RealId::cuStreamBeginCapture_v2);
  return begin_capture(hStream, mode, [&] { return real(hStream, mode); });
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  EGPU_REAL_OR_RETURN(cuStreamBeginCapture_v2_ptsz);
  note_call(RealId::cuStreamBeginCapture_v2_ptsz);
  return begin_capture(capture_key(hStream, true), mode, [&] { return real(hStream, mode); });
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode* dependencies,
                                             const CUgraphEdgeData* dependencyData,
                                             size_t numDependencies, CUstreamCaptureMode mode) {
  EGPU_REAL_OR_RETURN(cuStreamBeginCaptureToGraph);
  note_call(RealId::cuStreamBeginCaptureToGraph);
  return begin_capture(hStream, mode, [&] {
    return real(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
  });
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  const CUgraphEdgeData* dependencyData,
                                                  size_t numDependencies,
                                                  CUstreamCaptureMode mode) {
  EGPU_REAL_OR_RETURN(cuStreamBeginCaptureToGraph_ptsz);
  note_call(RealId::cuStreamBeginCaptureToGraph_ptsz);
  return begin_capture(capture_key(hStream, true), mode, [&] {
    return real(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
  });
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  EGPU_REAL_OR_RETURN(cuStreamEndCapture);
  note_call(RealId::cuStreamEndCapture);
  return ended(real(hStream, phGraph), hStream);
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  EGPU_REAL_OR_RETURN(cuStreamEndCapture_ptsz);
  note_call(RealId::cuStreamEndCapture_ptsz);
  return ended(real(hStream, phGraph), capture_key(hStream, true));
}

}  // extern "C"
