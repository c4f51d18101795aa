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

bool pool_known(ProcessState& s, uint64_t key) {
  return s.mem_pools()
      .device_of(reinterpret_cast<const void*>(static_cast<uintptr_t>(key)))
      .has_value();
}

constexpr PoolKind kMemPool{AllocationKind::kMemPool, &pool_reserved, &pool_used, &pool_known};

uint64_t key_of(CUmemoryPool pool) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pool));
}

// A key apart from live pools' (a pool made later may get a destroyed
// one's handle), for what a destroyed pool's live allocations still hold.
uint64_t destroyed_key(uint64_t key) {
  return key | 1;
}
bool is_destroyed_key(uint64_t key) {
  return (key & 1) != 0;
}

void settle(ProcessState& s, uint64_t key, int ordinal, const PoolTicket* ticket) {
  if (GpuBinding* b = s.binding(ordinal)) {
    settle_pool_charge(s, *b, kMemPool, key, s.mem_pools().settle_mutex(), s.mem_pools().promises(),
                       ticket);
  }
}

}  // namespace

PoolAdmission admit_pool_allocation(CUmemoryPool pool, uint64_t bytes,
                                    PoolTicket* ticket) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return PoolAdmission::kPassThrough;
  try {
    GpuBinding* current = s->current_binding();
    GpuBinding* b = current;
    if (pool == nullptr) {
      const auto get_device = EGPU_REAL(cuDeviceGet);
      const auto current_pool = EGPU_REAL(cuDeviceGetMemPool);
      CUdevice dev = 0;
      if (b == nullptr) return PoolAdmission::kPassThrough;
      if (get_device == nullptr || current_pool == nullptr ||
          get_device(&dev, b->ordinal()) != CUDA_SUCCESS ||
          current_pool(&pool, dev) != CUDA_SUCCESS || pool == nullptr) {
        return PoolAdmission::kPerPointer;
      }
      s->mem_pools().note(pool, b->ordinal());  // a device's pool is on it
    } else if (const auto ordinal = s->mem_pools().device_of(pool)) {
      if (*ordinal == MemPoolTable::kHost) return PoolAdmission::kPassThrough;
      b = s->binding(*ordinal);  // where the pool is, not where the caller is
    }
    if (b == nullptr)
      return current == nullptr ? PoolAdmission::kPassThrough : PoolAdmission::kPerPointer;
    if (!admit_to_pool(*s, *b, kMemPool, key_of(pool), s->mem_pools().promises(), bytes, ticket)) {
      cancel_pool_ticket(s->mem_pools().promises(), ticket);
      return PoolAdmission::kDenied;
    }
    return PoolAdmission::kAdmitted;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error checking a pool allocation: counted by itself");
    cancel_pool_ticket(s->mem_pools().promises(), ticket);
    return PoolAdmission::kPerPointer;
  }
}

void settle_pool_allocation(const PoolTicket& ticket, CUresult rc) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  if (rc != CUDA_SUCCESS) {  // nothing allocated: what was reserved goes back
    release_pool_ticket(s->mem_pools().promises(), ticket);
    return;
  }
  try {
    for (const auto& [key, ordinal] : ticket.pools) {
      s->mem_pools().note(reinterpret_cast<const void*>(static_cast<uintptr_t>(key)), ordinal);
      settle(*s, key, ordinal, &ticket);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling a pool allocation: accounting may be off");
  }
  end_admissions(s->mem_pools().promises(), ticket);
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
    const auto ordinal = s->mem_pools().device_of(pool);
    if (ordinal && *ordinal != MemPoolTable::kHost) settle(*s, key_of(pool), *ordinal, nullptr);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling a memory pool: accounting may be off");
  }
}

void note_mem_pool(CUmemoryPool pool, const CUmemPoolProps& props) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable() || pool == nullptr) return;
  try {
    s->mem_pools().note(pool, props.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                                  ? props.location.id
                                  : MemPoolTable::kHost);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error noting a memory pool: its device is taken as the caller's");
  }
}

namespace {

// The pool's live allocations as the driver reports them (0 if it cannot).
uint64_t mem_pool_used(CUmemoryPool pool) noexcept {
  uint64_t used = 0;
  return pool_used(key_of(pool), &used) ? used : 0;
}

void end_mem_pool(CUmemoryPool pool, uint64_t used) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  try {
    const std::lock_guard lock(s->mem_pools().settle_mutex());
    const auto entry = s->allocations().take(AllocationKind::kMemPool, key_of(pool));
    if (!entry) return;
    const uint64_t kept = std::min(used, entry->bytes);
    if (entry->bytes > kept)
      release_allocation(*s, LiveAllocation{entry->bytes - kept, entry->ordinal});
    if (kept == 0) return;
    LiveAllocation gone = *entry;
    gone.bytes = kept;
    if (const auto earlier =
            s->allocations().take(AllocationKind::kMemPool, destroyed_key(key_of(pool))))
      gone.bytes += earlier->bytes;
    s->allocations().insert(AllocationKind::kMemPool, destroyed_key(key_of(pool)), gone);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error ending a memory pool: accounting may be off");
  }
}

}  // namespace

CUresult destroy_mem_pool(CUmemoryPool pool, CUresult (*destroy)(CUmemoryPool)) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable() || s->mem_pools().empty()) return destroy(pool);
  const uint64_t used = mem_pool_used(pool);  // what its live allocations still hold
  CUresult rc = CUDA_ERROR_UNKNOWN;
  bool destroyed = false;
  try {
    // No settle queries the handle once the driver destroyed the pool.
    const std::lock_guard lock(s->mem_pools().settle_mutex());
    destroyed = true;
    rc = destroy(pool);
    if (rc == CUDA_SUCCESS) s->mem_pools().forget(pool);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error destroying a memory pool: accounting may be off");
    if (!destroyed) return destroy(pool);
  }
  if (rc == CUDA_SUCCESS) end_mem_pool(pool, used);
  return rc;
}

void end_destroyed_pools(int ordinal) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  try {
    const std::lock_guard lock(s->mem_pools().settle_mutex());
    for (const uint64_t key : s->allocations().keys(AllocationKind::kMemPool)) {
      if (!is_destroyed_key(key)) continue;
      const auto entry = s->allocations().find(AllocationKind::kMemPool, key);
      if (!entry || (ordinal >= 0 && entry->ordinal != ordinal)) continue;
      s->allocations().take(AllocationKind::kMemPool, key);
      release_allocation(*s, *entry);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error ending destroyed pools: accounting may be off");
  }
}

}  // namespace egpu::shim
