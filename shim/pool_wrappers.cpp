// Memory-pool entry points (pool_memory.h): cuMemPoolCreate says where a
// pool is, cuMemPoolTrimTo gives memory back, cuMemPoolDestroy ends it.
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

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  EGPU_REAL_OR_RETURN(cuMemPoolCreate);
  egpu::shim::note_call(RealId::cuMemPoolCreate);
  const CUresult rc = real(pool, poolProps);
  if (rc == CUDA_SUCCESS && pool != nullptr && poolProps != nullptr)
    egpu::shim::note_mem_pool(*pool, *poolProps);
  return rc;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  EGPU_REAL_OR_RETURN(cuMemPoolDestroy);
  egpu::shim::note_call(RealId::cuMemPoolDestroy);
  return egpu::shim::destroy_mem_pool(pool, real);
}

}  // extern "C"
