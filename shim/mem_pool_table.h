// MemPoolTable: the stream-ordered memory pools the process made or
// allocated from (pool_memory.h), each with its device: the pools the shim
// settles after synchronisations, trims and context ends, and the part of
// each pool's free memory that allocations in flight count on. Thread-safe; no
// CUDA types, so that it is tested on its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "shim/free_part_promises.h"

namespace egpu::shim {

class MemPoolTable {
 public:
  static constexpr int kHost = -1;  // a pool of host memory: not the GPU's to count

  // `pool` is on device `ordinal` (kHost: in host memory). What was noted
  // first stays: a pool does not move.
  void note(const void* pool, int ordinal);
  void forget(const void* pool);
  // The device `pool` was noted on, if it was.
  std::optional<int> device_of(const void* pool) const;
  // Every known device pool with its device ordinal.
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
