// cuInit: where a process attaches to its instances (once, after the real
// driver initialised).
#include "shim/call_counters.h"
#include "shim/log.h"
#include "shim/process_state.h"

extern "C" CUresult CUDAAPI cuInit(unsigned int Flags) {
  const auto real = EGPU_REAL(cuInit);
  if (real == nullptr) return egpu::shim::missing_real_result();
  const CUresult result = real(Flags);
  egpu::shim::ProcessState* s = egpu::shim::process_state();
  egpu::shim::note_call(egpu::shim::RealId::cuInit);
  if (s == nullptr) return result;
  try {
    if (!s->env().managed) {
      EGPU_SHIM_LOG_ONCE("not in an egpu job, passing through");
    } else if (!s->usable()) {
      EGPU_SHIM_LOG_ONCE("%s: passing through", s->env().problem.c_str());
    } else if (result == CUDA_SUCCESS) {
      s->attach_all();
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error while attaching: passing through");
  }
  return result;
}
