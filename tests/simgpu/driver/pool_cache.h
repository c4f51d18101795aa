// Stream-ordered memory pools keep what is freed: a freed allocation's
// memory stays the pool's (charged to the device as kPoolCache) for its next
// allocations, until a synchronisation gives back what is above the pool's
// release threshold (0 by default: all of it), cuMemPoolTrimTo, or the
// pool's destruction. Without CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, what
// was freed is reused only after a synchronisation and the pool grows
// meanwhile (the driver does so for memory freed on another stream; it
// reuses a free on the same stream at once, which simgpu does not model).
// CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT is what the
// pool holds (its live allocations and what it keeps), USED_MEM_CURRENT its
// live allocations, as the driver reports them.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "driver/handles.h"

namespace egpu::simgpu::driver {

// An allocation of `bytes` from `pool` through ctx (what the pool keeps is
// used first).
CUresult pool_allocate(CUctx_st* ctx, CUmemPoolHandle_st* pool, uint64_t bytes, uint64_t* address);
// A free of `address`: true if it is a pool allocation (*rc says how it went).
bool pool_free(uint64_t address, CUresult* rc);
// A synchronisation: every pool gives back what is above its threshold.
void release_pool_excess();
// cuMemPoolTrimTo: `pool` keeps at most `keep` bytes (its live allocations
// whatever that is).
void trim_pool(CUmemPoolHandle_st* pool, uint64_t keep);
// cuMemPoolDestroy: what it keeps is given back.
void forget_pool(CUmemPoolHandle_st* pool);
// `ctx` was destroyed: the memory table freed its allocations and what the
// pools kept through it.
void forget_pool_memory(const CUctx_st* ctx);
// The pool's memory figures (RESERVED/USED_MEM_CURRENT/HIGH); false for
// another attribute.
bool pool_memory_figure(const CUmemPoolHandle_st* pool, CUmemPool_attribute attr, uint64_t* value);
// Resets a high to the current figure; false for another attribute.
bool reset_pool_memory_high(const CUmemPoolHandle_st* pool, CUmemPool_attribute attr);

}  // namespace egpu::simgpu::driver
