// cuGetProcAddress / cuGetProcAddress_v2: the real driver answers first (its
// version and per-thread-stream choice stand), then the shim swaps in its
// wrapper of that same ABI variant. Names the shim does not wrap come back as
// the real driver gave them.
#include "shim/call_counters.h"
#include "shim/cuda_api.h"
#include "shim/log.h"
#include "shim/process_state.h"
#include "shim/real_functions.h"
#include "shim/wrapped_symbols.h"

namespace egpu::shim {
namespace {

void* interpose(const char* symbol, void* real, int cuda_version, cuuint64_t flags) {
  if (real == nullptr || !looks_like_cuda_name(symbol)) return real;
  if (void* wrapper = wrapper_for_real(real)) return wrapper;
  // The driver returned a pointer that is not one of its exported functions:
  // pick the wrapper of the variant this request names.
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  if (void* wrapper = wrapper_for_request(symbol, cuda_version, per_thread)) {
    log_debug(
        "cuGetProcAddress(%s, %d, %llu): unknown driver pointer, using the wrapper of "
        "the matching variant",
        symbol, cuda_version, static_cast<unsigned long long>(flags));
    return wrapper;
  }
  return real;
}

}  // namespace
}  // namespace egpu::shim

extern "C" {

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  const auto real = EGPU_REAL(cuGetProcAddress_v2);
  if (real == nullptr) return egpu::shim::missing_real_result();
  (void)egpu::shim::process_state();  // EGPU_DEBUG's call counters start with it
  egpu::shim::note_call(egpu::shim::RealId::cuGetProcAddress_v2);
  const CUresult result = real(symbol, pfn, cudaVersion, flags, status);
  if (result == CUDA_SUCCESS && pfn != nullptr) {
    *pfn = egpu::shim::interpose(symbol, *pfn, cudaVersion, flags);
  }
  return result;
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                  cuuint64_t flags) {
  const auto real = EGPU_REAL(cuGetProcAddress);
  if (real == nullptr) return egpu::shim::missing_real_result();
  (void)egpu::shim::process_state();
  egpu::shim::note_call(egpu::shim::RealId::cuGetProcAddress);
  const CUresult result = real(symbol, pfn, cudaVersion, flags);
  if (result == CUDA_SUCCESS && pfn != nullptr) {
    *pfn = egpu::shim::interpose(symbol, *pfn, cudaVersion, flags);
  }
  return result;
}

}  // extern "C"
