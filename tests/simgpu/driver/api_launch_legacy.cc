// Pre-CUDA-4 launches (deprecated, still in every driver): a function's
// parameters are set piecewise with cuParamSet* into a buffer of
// cuParamSetSize bytes, its block with cuFuncSetBlockShape, and
// cuLaunch/cuLaunchGrid(Async) launch it with that buffer, which is read like
// a launch's CU_LAUNCH_PARAM_BUFFER_POINTER (its first 8 bytes: the duration).
#include "driver/cuda_api.h"
// after cuda.h:
#include <cstring>
#include <mutex>
#include <vector>

#include "driver/driver_state.h"
#include "driver/functions.h"
#include "driver/handles.h"

using egpu::simgpu::driver::guarded;
namespace drv = egpu::simgpu::driver;

namespace {

// CUDA's limit on a legacy parameter buffer.
constexpr unsigned kMaxParamBytes = 4096;

// The function's setup: module functions only (a library's CUkernel has no
// legacy parameters), nullptr with `rc` set otherwise.
CUfunc_st* legacy_function(CUfunction f, CUresult* rc) {
  *rc = drv::require_init();
  if (*rc != CUDA_SUCCESS) return nullptr;
  CUfunc_st* function = drv::registry().find<CUfunc_st>(f);
  if (function == nullptr) *rc = CUDA_ERROR_INVALID_HANDLE;
  return function;
}

CUresult set_bytes(CUfunction f, int offset, const void* bytes, unsigned count) {
  CUresult rc = CUDA_SUCCESS;
  CUfunc_st* function = legacy_function(f, &rc);
  if (function == nullptr) return rc;
  if (offset < 0 || (count != 0 && bytes == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  const auto start = static_cast<size_t>(offset);
  if (start + count > kMaxParamBytes) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(function->legacy_mutex);
  std::vector<char>& buffer = function->legacy_params;
  if (buffer.size() < start + count) buffer.resize(start + count);
  if (count != 0) std::memcpy(buffer.data() + start, bytes, count);
  return CUDA_SUCCESS;
}

CUresult launch_legacy(CUfunction f, int grid_width, int grid_height, CUstream stream) {
  CUresult rc = CUDA_SUCCESS;
  CUfunc_st* function = legacy_function(f, &rc);
  if (function == nullptr) return rc;
  if (grid_width <= 0 || grid_height <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<char> buffer;
  {
    std::lock_guard lock(function->legacy_mutex);
    buffer = function->legacy_params;
  }
  size_t size = buffer.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  return drv::launch_function(f, stream, nullptr, size == 0 ? nullptr : extra, false);
}

}  // namespace

extern "C" {

CUresult cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z) {
  return guarded([&] {
    CUresult rc = CUDA_SUCCESS;
    if (legacy_function(hfunc, &rc) == nullptr) return rc;
    return x > 0 && y > 0 && z > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes) {
  (void)bytes;
  return guarded([&] {
    CUresult rc = CUDA_SUCCESS;
    legacy_function(hfunc, &rc);
    return rc;
  });
}

CUresult cuParamSetSize(CUfunction hfunc, unsigned int numbytes) {
  return guarded([&] {
    CUresult rc = CUDA_SUCCESS;
    CUfunc_st* function = legacy_function(hfunc, &rc);
    if (function == nullptr) return rc;
    if (numbytes > kMaxParamBytes) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(function->legacy_mutex);
    function->legacy_params.resize(numbytes);
    return CUDA_SUCCESS;
  });
}

CUresult cuParamSeti(CUfunction hfunc, int offset, unsigned int value) {
  return guarded([&] { return set_bytes(hfunc, offset, &value, sizeof value); });
}

CUresult cuParamSetf(CUfunction hfunc, int offset, float value) {
  return guarded([&] { return set_bytes(hfunc, offset, &value, sizeof value); });
}

CUresult cuParamSetv(CUfunction hfunc, int offset, void* ptr, unsigned int numbytes) {
  return guarded([&] { return set_bytes(hfunc, offset, ptr, numbytes); });
}

CUresult cuLaunch(CUfunction f) {
  return guarded([&] { return launch_legacy(f, 1, 1, nullptr); });
}

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  return guarded([&] { return launch_legacy(f, grid_width, grid_height, nullptr); });
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream) {
  return guarded([&] { return launch_legacy(f, grid_width, grid_height, hStream); });
}

}  // extern "C"
