#include "driver/graph_memory.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "driver/contexts.h"
#include "driver/memory_accounting.h"

namespace egpu::simgpu::driver {
namespace {

// Far above the memory table's addresses, so the two never meet.
constexpr uint64_t kGraphAddressBase = uint64_t{0x7c} << 40;
constexpr uint64_t kGraphAddressAlignment = uint64_t{2} << 20;

struct Pool {
  uint64_t used = 0;
  uint64_t reserved = 0;
  uint64_t used_high = 0;
  uint64_t reserved_high = 0;
  struct Backing {
    uint64_t address = 0;  // its memory-table entry
    uint64_t bytes = 0;
    const CUctx_st* owner = nullptr;
  };
  std::vector<Backing> backing;
};

struct Mapping {
  uint64_t bytes = 0;
  int ordinal = 0;
  bool live = false;      // allocated by a launch, not freed yet
  bool orphaned = false;  // its graph is destroyed: it leaves the pool's use when freed
};

struct GraphMemory {
  std::mutex mu;  // taken before any device's lock, never inside one
  uint64_t next_address = kGraphAddressBase;
  uint64_t epoch = 1;  // a graph mapped in an earlier epoch lost its mappings
  std::map<uint64_t, Mapping> allocations;
  std::map<int, Pool> pools;
};

GraphMemory& state() {
  static auto* s = new GraphMemory();  // never destroyed: calls may come during exit
  return *s;
}

// Under mu: grows `ordinal`'s pool to `bytes`, backed through ctx's process.
CUresult grow_pool(CUctx_st* ctx, int ordinal, Pool& pool, uint64_t bytes,
                   std::vector<std::pair<Pool*, uint64_t>>* grown) {
  if (bytes <= pool.reserved) return CUDA_SUCCESS;
  CUctx_st* owner = ctx;
  if (owner->ordinal != ordinal) {
    if (const CUresult rc = context_for_device(ordinal, &owner); rc != CUDA_SUCCESS) return rc;
  }
  const uint64_t more = bytes - pool.reserved;
  uint64_t address = 0;
  if (const CUresult rc = account_allocation(owner, more, AllocationKind::kGraphPool, &address);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  pool.backing.push_back({address, more, owner});
  pool.reserved += more;
  grown->emplace_back(&pool, more);
  return CUDA_SUCCESS;
}

// Under mu: maps `exec`'s allocations, growing the pools as needed.
CUresult map_exec(GraphMemory& s, CUctx_st* ctx, CUgraphExec_st* exec) {
  std::map<int, uint64_t> wanted;  // per device
  for (const GraphAllocation& a : exec->allocs)
    wanted[a.ordinal] += a.bytes;
  std::vector<std::pair<Pool*, uint64_t>> grown;
  for (const auto& [ordinal, bytes] : wanted) {
    Pool& pool = s.pools[ordinal];
    if (const CUresult rc = grow_pool(ctx, ordinal, pool, pool.used + bytes, &grown);
        rc != CUDA_SUCCESS) {
      for (auto& [p, more] : grown) {  // nothing changes: give back what grew
        release_allocation(p->backing.back().address, AllocationKind::kGraphPool);
        p->backing.pop_back();
        p->reserved -= more;
      }
      return rc;
    }
  }
  for (const auto& [ordinal, bytes] : wanted) {
    Pool& pool = s.pools[ordinal];
    pool.used += bytes;
    pool.used_high = std::max(pool.used_high, pool.used);
    pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
  }
  exec->mapped_epoch = s.epoch;
  return CUDA_SUCCESS;
}

}  // namespace

uint64_t new_graph_address(int ordinal, uint64_t bytes) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  const uint64_t address = s.next_address;
  s.next_address +=
      (bytes + kGraphAddressAlignment - 1) / kGraphAddressAlignment * kGraphAddressAlignment;
  s.allocations[address] = Mapping{bytes, ordinal, false};
  return address;
}

bool find_graph_allocation(uint64_t address, GraphAllocation* out) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  const auto it = s.allocations.find(address);
  if (it == s.allocations.end()) return false;
  *out = GraphAllocation{address, it->second.bytes, it->second.ordinal};
  return true;
}

CUresult run_graph_memory(CUctx_st* ctx, CUgraphExec_st* exec, bool map) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  for (const GraphAllocation& a : exec->allocs) {
    const auto it = s.allocations.find(a.address);
    if (it == s.allocations.end() || (map && it->second.live)) return CUDA_ERROR_INVALID_VALUE;
  }
  if (exec->mapped_epoch != s.epoch) {
    if (const CUresult rc = map_exec(s, ctx, exec); rc != CUDA_SUCCESS) return rc;
  }
  if (!map) return CUDA_SUCCESS;
  for (const GraphAllocation& a : exec->allocs)
    s.allocations[a.address].live = true;
  for (const uint64_t address : exec->frees) {
    const auto it = s.allocations.find(address);
    if (it == s.allocations.end() || !it->second.live) continue;
    it->second.live = false;
    if (it->second.orphaned) s.pools[it->second.ordinal].used -= it->second.bytes;
  }
  return CUDA_SUCCESS;
}

void forget_graph_exec(const CUgraphExec_st* exec) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  if (exec->mapped_epoch != s.epoch) return;
  for (const GraphAllocation& a : exec->allocs) {
    Mapping& m = s.allocations[a.address];
    if (m.live) {
      m.orphaned = true;  // in use until freed
    } else {
      s.pools[m.ordinal].used -= m.bytes;
    }
  }
}

bool free_graph_allocation(uint64_t address, CUresult* rc) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  const auto it = s.allocations.find(address);
  if (it == s.allocations.end()) return false;
  if (!it->second.live) {
    *rc = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  it->second.live = false;
  if (it->second.orphaned) s.pools[it->second.ordinal].used -= it->second.bytes;
  *rc = CUDA_SUCCESS;
  return true;
}

CUresult graph_memory_attribute(int ordinal, CUgraphMem_attribute attr, uint64_t* value) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  const Pool& pool = s.pools[ordinal];
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *value = pool.used;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *value = pool.used_high;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *value = pool.reserved;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *value = pool.reserved_high;
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult reset_graph_memory_high(int ordinal, CUgraphMem_attribute attr) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  Pool& pool = s.pools[ordinal];
  if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) {
    pool.used_high = pool.used;
  } else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) {
    pool.reserved_high = pool.reserved;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult trim_graph_memory(int ordinal) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  Pool& pool = s.pools[ordinal];
  for (size_t i = pool.backing.size(); i-- > 0;) {
    const Pool::Backing b = pool.backing[i];
    if (pool.reserved - b.bytes < pool.used) continue;
    release_allocation(b.address, AllocationKind::kGraphPool);
    pool.reserved -= b.bytes;
    pool.backing.erase(pool.backing.begin() + static_cast<long>(i));
  }
  return CUDA_SUCCESS;
}

void forget_graph_memory(const CUctx_st* ctx) {
  GraphMemory& s = state();
  const std::lock_guard lock(s.mu);
  for (auto& [ordinal, pool] : s.pools) {
    const size_t before = pool.backing.size();
    std::erase_if(pool.backing, [&](const Pool::Backing& b) {
      if (b.owner != ctx) return false;
      pool.reserved -= b.bytes;
      return true;
    });
    if (pool.backing.size() == before) continue;
    pool.used = 0;  // the pool's mappings and allocations went with it
    ++s.epoch;
    for (auto& [address, m] : s.allocations) {
      if (m.ordinal == ordinal) m.live = m.orphaned = false;
    }
  }
}

}  // namespace egpu::simgpu::driver
