// AllocationTable: the process's live device allocations on managed GPUs, so a
// free releases exactly what its allocation reserved. Pointers, arrays, VMM
// allocations (keyed by VmmMappings' serial), context limits (the driver's
// heap, stack and printf buffers), graph pools and memory pools are
// separate key spaces.
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace egpu::shim {

enum class AllocationKind {
  kPointer,
  kArray,
  kMipmappedArray,
  kVmmHandle,
  kContextLimit,
  kGraphPool,  // a device's graph memory pool (graph_memory.h), keyed by ordinal
  kMemPool,    // a stream-ordered memory pool (pool_memory.h), keyed by CUmemoryPool
};

struct LiveAllocation {
  uint64_t bytes = 0;
  int ordinal = 0;  // CUDA device ordinal it is accounted on
  // The context (a CUcontext) whose end frees it with everything else in
  // it; 0: none (VMM handles outlive contexts, context limits are released
  // by context_limits.cpp, imports are not followed).
  uintptr_t context = 0;
};

class AllocationTable {
 public:
  // Returns the entry it replaces: the driver handed out the key again, so
  // that allocation is gone and its bytes must be given back.
  std::optional<LiveAllocation> insert(AllocationKind kind, uint64_t key,
                                       LiveAllocation allocation);
  // Removes and returns the entry (before the driver frees it, so that a
  // recycled address can never meet a stale entry).
  std::optional<LiveAllocation> take(AllocationKind kind, uint64_t key);
  // A copy of the entry, left in place.
  std::optional<LiveAllocation> find(AllocationKind kind, uint64_t key) const;
  // Removes and returns every entry of `context` (not 0): the driver freed
  // them when it destroyed the context.
  std::vector<LiveAllocation> take_context(uintptr_t context);
  // The keys of `kind`'s live entries.
  std::vector<uint64_t> keys(AllocationKind kind) const;
  // Bytes live on `ordinal` (what a fresh attach must account).
  uint64_t live_bytes(int ordinal) const;
  size_t size() const;

 private:
  static constexpr int kKinds = 7;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, LiveAllocation> maps_[kKinds];
};

}  // namespace egpu::shim
