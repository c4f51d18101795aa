// cuGetProcAddress(_v2): the driver's own symbol table (what cudart and
// careful programs use instead of dlsym).
#include "driver/cuda_api.h"
// after cuda.h:
#include <cstring>

#include "driver/proc_address_table.h"

namespace {

// flags: 0 default (= legacy stream), 1 legacy, 2 per-thread default stream.
CUresult lookup(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const auto found = egpu::simgpu::driver::find_proc_address(symbol, cuda_version, per_thread);
  if (status != nullptr) {
    *status = found.status;
  }
  if (found.status != CU_GET_PROC_ADDRESS_SUCCESS) return CUDA_ERROR_NOT_FOUND;
  *pfn = found.function;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
