// Which names the shim wraps, and how a name, a real function pointer or a
// cuGetProcAddress request (API name, version, per-thread flag) maps to the
// shim's wrapper of exactly the same ABI variant.
#pragma once

#include <cstdint>

namespace egpu::shim {

// The wrapper exported under the ABI name `name`; null if the shim does not wrap it.
void* wrapper_for_name(const char* name);
// The wrapper of the real function `real` (as the real cuGetProcAddress returned it).
void* wrapper_for_real(void* real);
// The wrapper for a cuGetProcAddress request when the real pointer was not
// recognised: the newest ABI variant of `api` at `cuda_version`, per-thread
// (_ptsz/_ptds) when `per_thread` and one exists.
void* wrapper_for_request(const char* api, int cuda_version, bool per_thread);
// Cheap test used by dlsym: could `name` be a CUDA driver symbol at all?
inline bool looks_like_cuda_name(const char* name) {
  return name != nullptr && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

}  // namespace egpu::shim
