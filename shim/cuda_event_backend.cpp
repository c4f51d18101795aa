#include "shim/cuda_event_backend.h"

#include <cmath>

#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

CUevent as_event(pacing::EventHandle e) {
  return reinterpret_cast<CUevent>(e);
}

}  // namespace

bool CudaEventBackend::create_event(pacing::EventHandle* event) {
  const auto create = EGPU_REAL(cuEventCreate);
  CUevent created = nullptr;
  if (create == nullptr || create(&created, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
  *event = reinterpret_cast<pacing::EventHandle>(created);
  return true;
}

void CudaEventBackend::destroy_event(pacing::EventHandle event) {
  if (const auto destroy = EGPU_REAL(cuEventDestroy_v2)) destroy(as_event(event));
}

bool CudaEventBackend::record(pacing::EventHandle event, pacing::StreamHandle stream) {
  const auto record_fn = EGPU_REAL(cuEventRecord);
  return record_fn != nullptr &&
         record_fn(as_event(event), reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS;
}

pacing::EventState CudaEventBackend::query(pacing::EventHandle event) {
  const auto query_fn = EGPU_REAL(cuEventQuery);
  if (query_fn == nullptr) return pacing::EventState::kFailed;
  switch (query_fn(as_event(event))) {
    case CUDA_SUCCESS:
      return pacing::EventState::kComplete;
    case CUDA_ERROR_NOT_READY:
      return pacing::EventState::kPending;
    default:
      return pacing::EventState::kFailed;
  }
}

bool CudaEventBackend::elapsed_ns(pacing::EventHandle start, pacing::EventHandle end, int64_t* ns) {
  auto elapsed = EGPU_REAL(cuEventElapsedTime_v2);
  if (elapsed == nullptr) elapsed = EGPU_REAL(cuEventElapsedTime);
  float ms = 0;
  if (elapsed == nullptr || elapsed(&ms, as_event(start), as_event(end)) != CUDA_SUCCESS) {
    return false;
  }
  *ns = std::llround(static_cast<double>(ms) * 1e6);
  return true;
}

}  // namespace egpu::shim
