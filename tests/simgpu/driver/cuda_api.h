// cuda.h as the driver itself sees it: every ABI name declared (versioned,
// unversioned, _ptsz/_ptds), with default visibility so that exactly the CUDA
// API is exported while the rest of the library is hidden. Include this
// before anything else that includes cuda.h.
#pragma once

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#ifndef __CUDA_API_PUSH_VISIBILITY_DEFAULT
#define __CUDA_API_PUSH_VISIBILITY_DEFAULT 1
#endif
#include <cuda.h>

#include <exception>
#include <new>

namespace egpu::simgpu::driver {

// Runs an API body; no exception crosses the C ABI.
template <class Body>
CUresult guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

}  // namespace egpu::simgpu::driver
