// Stream-ordered memory pools (cuMemAllocAsync, cuMemAllocFromPoolAsync): a
// pool keeps freed memory for its next allocations, up to its release
// threshold until a synchronisation (PyTorch's cudaMallocAsync backend sets
// the threshold to the maximum: it keeps everything) and until
// cuMemPoolTrimTo. So the quota counts each pool's size as the driver
// reports it (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not its allocations: an
// allocation that the pool's free part (not counted on by another in
// flight) cannot hold reserves the rest first and is refused with
// CUDA_ERROR_OUT_OF_MEMORY when that does not fit; the charge is settled
// after every pool allocation, synchronous free, synchronisation, trim,
// pool destruction and context end.
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
// After the driver's call returned `rc`: a pool it allocated from is known
// from then on.
void settle_pool_allocation(const PoolTicket& ticket, CUresult rc) noexcept;
// Every known pool may have changed (a synchronisation, a context's end).
void settle_mem_pools() noexcept;
// cuMemPoolTrimTo: `pool` may have shrunk.
void settle_mem_pool(CUmemoryPool pool) noexcept;
// cuMemPoolCreate made `pool` with `props`: where it is.
void note_mem_pool(CUmemoryPool pool, const CUmemPoolProps& props) noexcept;
// cuMemPoolDestroy through `destroy` (the real one): what the pool's live
// allocations hold stays charged (the driver frees it when they are freed,
// which the shim no longer sees) until its device's primary context ends.
CUresult destroy_mem_pool(CUmemoryPool pool, CUresult (*destroy)(CUmemoryPool)) noexcept;
// A primary context ended on device `ordinal`: destroyed pools' charges go.
void end_destroyed_pools(int ordinal) noexcept;

}  // namespace egpu::shim
