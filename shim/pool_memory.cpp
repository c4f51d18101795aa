#include "shim/pool_memory.h"

#include <algorithm>

#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

bool pool_attribute(uint64_t key, CUmemPool_attribute attr, uint64_t* bytes) {
  const auto get = EGPU_REAL(cuMemPoolGetAttribute);
  cuuint64_t value = 0;
  if (get == nullptr || get(reinterpret_cast<CUmemoryPool>(key), attr, &value) != CUDA_SUCCESS)
    return false;
  *bytes = value;
  return true;
}

bool pool_reserved(uint64_t key, uint64_t* bytes) {
  return pool_attribute(key, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, bytes);
}

bool pool_used(uint64_t key, uint64_t* bytes) {
  return pool_attribute(key, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, bytes);
}

constexpr PoolKind kMemPool{AllocationKind::kMemPool, &pool_reserved, &pool_used};

uint64_t key_of(CUmemoryPool pool) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pool));
}

void settle(ProcessState& s, uint64_t key, int ordinal, const PoolTicket* ticket) {
  if (GpuBinding* b = s.binding(ordinal))
    settle_pool_charge(s, *b, kMemPool, key, s.mem_pools().settle_mutex(), ticket);
}

}  // namespace

PoolAdmission admit_pool_allocation(CUmemoryPool pool, uint64_t bytes,
                                    PoolTicket* ticket) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return PoolAdmission::kPassThrough;
  try {
    GpuBinding* b = s->current_binding();
    if (b == nullptr) return PoolAdmission::kPassThrough;
    if (pool == nullptr) {
      const auto current_pool = EGPU_REAL(cuDeviceGetMemPool);
      if (current_pool == nullptr || current_pool(&pool, b->ordinal()) != CUDA_SUCCESS ||
          pool == nullptr) {
        return PoolAdmission::kPerPointer;
      }
    }
    uint64_t figure = 0;
    if (!pool_reserved(key_of(pool), &figure)) return PoolAdmission::kPerPointer;
    s->mem_pools().note(pool, b->ordinal());
    settle(*s, key_of(pool), b->ordinal(), nullptr);  // as it is now
    if (!admit_to_pool(*s, *b, kMemPool, key_of(pool), s->mem_pools().promises(), bytes, ticket)) {
      cancel_pool_ticket(s->mem_pools().promises(), ticket);
      return PoolAdmission::kDenied;
    }
    return PoolAdmission::kAdmitted;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error checking a pool allocation: charged after it");
    return PoolAdmission::kAdmitted;
  }
}

void settle_pool_allocation(const PoolTicket& ticket) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  try {
    for (const auto& [key, promised] : ticket.promised)
      s->mem_pools().promises().unpromise(key, promised);
    for (const auto& [key, ordinal] : ticket.pools)
      settle(*s, key, ordinal, &ticket);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling a pool allocation: accounting may be off");
  }
}

void settle_mem_pools() noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable() || s->mem_pools().empty()) return;
  try {
    for (const auto& [pool, ordinal] : s->mem_pools().pools())
      settle(*s, reinterpret_cast<uintptr_t>(pool), ordinal, nullptr);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling memory pools: accounting may be off");
  }
}

void settle_mem_pool(CUmemoryPool pool) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable() || s->mem_pools().empty()) return;
  try {
    for (const auto& [known, ordinal] : s->mem_pools().pools()) {
      if (known == pool) settle(*s, key_of(pool), ordinal, nullptr);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling a memory pool: accounting may be off");
  }
}

uint64_t mem_pool_used(CUmemoryPool pool) noexcept {
  uint64_t used = 0;
  return pool_used(key_of(pool), &used) ? used : 0;
}

void end_mem_pool(CUmemoryPool pool, uint64_t used) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable() || s->mem_pools().empty()) return;
  try {
    s->mem_pools().forget(pool);
    const std::lock_guard lock(s->mem_pools().settle_mutex());
    const auto entry = s->allocations().take(AllocationKind::kMemPool, key_of(pool));
    if (!entry) return;
    if (entry->bytes > used) {
      release_allocation(*s, LiveAllocation{entry->bytes - used, entry->ordinal});
    }
    if (used > 0) {
      // Keyed apart from live pools (a pool made later may get the handle),
      // with what earlier pools of that handle left.
      const uint64_t gone = key_of(pool) | 1;
      LiveAllocation kept = *entry;
      kept.bytes = std::min(used, entry->bytes);
      if (const auto earlier = s->allocations().take(AllocationKind::kMemPool, gone))
        kept.bytes += earlier->bytes;
      s->allocations().insert(AllocationKind::kMemPool, gone, kept);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error ending a memory pool: accounting may be off");
  }
}

}  // namespace egpu::shim
