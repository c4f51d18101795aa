#include "driver/pool_cache.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "driver/memory_accounting.h"

namespace egpu::simgpu::driver {
namespace {

struct Kept {
  uint64_t address = 0;  // its memory-table entry
  uint64_t bytes = 0;
  const CUctx_st* owner = nullptr;
  bool synced = false;  // a synchronisation passed since it was freed
};

struct PoolMemory {
  uint64_t used = 0;
  uint64_t kept = 0;
  uint64_t used_high = 0;
  uint64_t reserved_high = 0;
  std::vector<Kept> chunks;
};

struct Live {
  const CUmemPoolHandle_st* pool = nullptr;
  uint64_t bytes = 0;
  const CUctx_st* owner = nullptr;
};

struct PoolCache {
  std::mutex mu;  // taken before any device's lock, never inside one
  std::map<const CUmemPoolHandle_st*, PoolMemory> pools;
  std::map<uint64_t, Live> live;
};

PoolCache& cache() {
  static auto* c = new PoolCache();  // never destroyed: calls may come during exit
  return *c;
}

// Under mu: gives back up to `bytes` of what `p` keeps (of what a
// synchronisation passed only, if `synced_only`); returns how much.
uint64_t give_back(PoolMemory& p, uint64_t bytes, bool synced_only) {
  uint64_t given = 0;
  for (size_t i = p.chunks.size(); i-- > 0 && given < bytes;) {
    const Kept chunk = p.chunks[i];
    if (synced_only && !chunk.synced) continue;
    p.chunks.erase(p.chunks.begin() + static_cast<long>(i));
    release_allocation(chunk.address, AllocationKind::kPoolCache);
    p.kept -= chunk.bytes;
    given += chunk.bytes;
    if (given <= bytes) continue;
    // Part of the chunk stays: kept as a smaller one.
    uint64_t address = 0;
    const uint64_t rest = given - bytes;
    if (account_allocation(const_cast<CUctx_st*>(chunk.owner), rest, AllocationKind::kPoolCache,
                           &address) == CUDA_SUCCESS) {
      p.chunks.push_back({address, rest, chunk.owner, chunk.synced});
      p.kept += rest;
      given -= rest;
    }
  }
  return given;
}

// Under mu: `p` keeps at most `target` bytes.
void shrink(PoolMemory& p, uint64_t target) {
  if (p.kept > target) give_back(p, p.kept - target, false);
}

void note_highs(PoolMemory& p) {
  p.used_high = std::max(p.used_high, p.used);
  p.reserved_high = std::max(p.reserved_high, p.used + p.kept);
}

}  // namespace

CUresult pool_allocate(CUctx_st* ctx, CUmemPoolHandle_st* pool, uint64_t bytes, uint64_t* address) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  PoolMemory& p = c.pools[pool];
  // What it kept becomes the allocation; without opportunistic reuse, only
  // what a synchronisation passed (the driver cannot know the rest is free).
  give_back(p, bytes, !pool->reuse_opportunistic);
  const CUresult rc = account_allocation(ctx, bytes, AllocationKind::kAsync, address);
  if (rc != CUDA_SUCCESS) return rc;
  c.live[*address] = Live{pool, bytes, ctx};
  p.used += bytes;
  note_highs(p);
  return CUDA_SUCCESS;
}

bool pool_free(uint64_t address, CUresult* rc) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  const auto it = c.live.find(address);
  if (it == c.live.end()) return false;
  const Live freed = it->second;
  c.live.erase(it);
  *rc = release_allocation(address, AllocationKind::kAsync);
  if (freed.pool == nullptr) return true;  // its pool is gone: nothing keeps it
  PoolMemory& p = c.pools[freed.pool];
  p.used -= std::min(p.used, freed.bytes);
  uint64_t kept = 0;
  if (account_allocation(const_cast<CUctx_st*>(freed.owner), freed.bytes,
                         AllocationKind::kPoolCache, &kept) == CUDA_SUCCESS) {
    p.chunks.push_back({kept, freed.bytes, freed.owner, false});
    p.kept += freed.bytes;
  }
  return true;
}

void release_pool_excess() {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  for (auto& [pool, p] : c.pools) {
    const uint64_t threshold = pool->release_threshold;
    shrink(p, threshold > p.used ? threshold - p.used : 0);
    for (Kept& k : p.chunks)
      k.synced = true;
  }
}

void trim_pool(CUmemPoolHandle_st* pool, uint64_t keep) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  PoolMemory& p = c.pools[pool];
  shrink(p, keep > p.used ? keep - p.used : 0);
}

void forget_pool(CUmemPoolHandle_st* pool) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  const auto it = c.pools.find(pool);
  if (it == c.pools.end()) return;
  shrink(it->second, 0);
  // Its live allocations stay allocated until freed (then nothing is kept).
  for (auto& [address, live] : c.live) {
    if (live.pool == pool) live.pool = nullptr;
  }
  c.pools.erase(it);
}

void forget_pool_memory(const CUctx_st* ctx) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  for (auto it = c.live.begin(); it != c.live.end();) {
    if (it->second.owner != ctx) {
      ++it;
      continue;
    }
    if (const auto p = c.pools.find(it->second.pool); p != c.pools.end())
      p->second.used -= std::min(p->second.used, it->second.bytes);
    it = c.live.erase(it);
  }
  for (auto& [pool, p] : c.pools) {
    std::erase_if(p.chunks, [&](const Kept& k) {
      if (k.owner != ctx) return false;
      p.kept -= k.bytes;
      return true;
    });
  }
}

bool pool_memory_figure(const CUmemPoolHandle_st* pool, CUmemPool_attribute attr, uint64_t* value) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  const auto it = c.pools.find(pool);
  const PoolMemory p = it != c.pools.end() ? it->second : PoolMemory{};
  switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *value = p.used + p.kept;
      return true;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *value = p.reserved_high;
      return true;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *value = p.used;
      return true;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *value = p.used_high;
      return true;
    default:
      return false;
  }
}

bool reset_pool_memory_high(const CUmemPoolHandle_st* pool, CUmemPool_attribute attr) {
  PoolCache& c = cache();
  const std::lock_guard lock(c.mu);
  PoolMemory& p = c.pools[pool];
  if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) {
    p.reserved_high = p.used + p.kept;
  } else if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) {
    p.used_high = p.used;
  } else {
    return false;
  }
  return true;
}

}  // namespace egpu::simgpu::driver
