// MemPoolTable: the stream-ordered memory pools the process allocated from
// (pool_memory.h), each with its device: the pools the shim settles after
// frees, synchronisations, trims and context ends, and the part of each
// pool's free memory that allocations in flight count on. Thread-safe; no
// CUDA types, so that it is tested on its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "shim/free_part_promises.h"

namespace egpu::shim {

class MemPoolTable {
 public:
  void note(const void* pool, int ordinal);
  void forget(const void* pool);
  // Every known pool with its device ordinal.
  std::vector<std::pair<const void*, int>> pools() const;
  // One load: true while the process has allocated from no pool.
  bool empty() const { return size_.load(std::memory_order_relaxed) == 0; }

  FreePartPromises& promises() { return promises_; }
  // Held while a pool's entry in the AllocationTable is settled.
  std::mutex& settle_mutex() { return settle_mu_; }

 private:
  mutable std::mutex mu_;
  std::map<const void*, int> pools_;
  std::atomic<size_t> size_{0};
  FreePartPromises promises_;
  std::mutex settle_mu_;
};

}  // namespace egpu::shim
