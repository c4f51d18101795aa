// Stream-ordered memory pools (cuMemAllocAsync, cuMemAllocFromPoolAsync): a
// pool keeps freed memory for its next allocations, up to its release
// threshold until a synchronisation (PyTorch's cudaMallocAsync backend sets
// the threshold to the maximum: it keeps everything) and until
// cuMemPoolTrimTo. So the quota counts each pool's size as the driver
// reports it (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not its allocations: an
// allocation that the pool's free part (not counted on by another in
// flight) cannot hold reserves the rest first and is refused with
// CUDA_ERROR_OUT_OF_MEMORY when that does not fit; the charge is settled
// after every pool allocation, free, synchronisation, trim, pool destruction
// and context end, and before any allocation is refused for the quota.
#pragma once

#include "shim/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "shim/pool_charge.h"

namespace egpu::shim {

enum class PoolAdmission {
  kPassThrough,  // not managed here: the driver's call as it is
  kPerPointer,   // the pool is unknown: account the allocation itself
  kAdmitted,     // settle_pool_allocation after the driver's call
  kDenied,       // over the quota: CUDA_ERROR_OUT_OF_MEMORY
};

// Before a stream-ordered allocation of `bytes` from `pool` (null: the
// current device's current pool).
PoolAdmission admit_pool_allocation(CUmemoryPool pool, uint64_t bytes, PoolTicket* ticket) noexcept;
void settle_pool_allocation(const PoolTicket& ticket) noexcept;
// Every known pool may have changed (a free, a synchronisation, a context's
// end, an allocation about to be refused).
void settle_mem_pools() noexcept;
// cuMemPoolTrimTo: `pool` may have shrunk.
void settle_mem_pool(CUmemoryPool pool) noexcept;
// cuMemPoolDestroy: what the pool's live allocations hold stays charged
// (the driver frees it when they are freed, which the shim no longer sees:
// charged until the process ends); `used` was read before the destruction.
void end_mem_pool(CUmemoryPool pool, uint64_t used) noexcept;
// The pool's live allocations as the driver reports them (0 if it cannot).
uint64_t mem_pool_used(CUmemoryPool pool) noexcept;

}  // namespace egpu::shim
