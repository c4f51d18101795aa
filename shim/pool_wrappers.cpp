// Memory-pool entry points that change what a pool holds (pool_memory.h):
// cuMemPoolTrimTo gives memory back, cuMemPoolDestroy ends the pool.
#include "shim/pool_memory.h"
#include "shim/real_functions.h"

using egpu::shim::RealId;

extern "C" {

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  EGPU_REAL_OR_RETURN(cuMemPoolTrimTo);
  egpu::shim::note_call(RealId::cuMemPoolTrimTo);
  const CUresult rc = real(pool, minBytesToKeep);
  egpu::shim::settle_mem_pool(pool);
  return rc;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  EGPU_REAL_OR_RETURN(cuMemPoolDestroy);
  egpu::shim::note_call(RealId::cuMemPoolDestroy);
  const uint64_t used = egpu::shim::mem_pool_used(pool);
  const CUresult rc = real(pool);
  if (rc == CUDA_SUCCESS) egpu::shim::end_mem_pool(pool, used);
  return rc;
}

}  // extern "C"
