// GraphExecTable: the process's instantiated graphs that have memory nodes
// (graph_memory.h): what each allocates per device, and whether the driver
// has mapped that memory to it yet (it stays mapped to the graph across
// launches, until the graph is destroyed), and the part of each device's
// graph pool that admissions in flight count on. Thread-safe; no CUDA
// types, so that it is tested on its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shim/free_part_promises.h"

namespace egpu::shim {

// Bytes a graph allocates, per CUDA device ordinal.
using GraphAllocations = std::vector<std::pair<int, uint64_t>>;

class GraphExecTable {
 public:
  struct Entry {
    GraphAllocations allocations;
    bool mapped = false;  // launched or uploaded once: its memory is the driver's to keep
  };

  // `exec` was instantiated (a handle the driver hands out again replaces
  // what was noted for it); empty allocations: nothing to note.
  void note(const void* exec, GraphAllocations allocations);
  void forget(const void* exec);
  std::optional<Entry> find(const void* exec) const;
  void set_mapped(const void* exec);
  // One load: true while no graph with memory nodes is known.
  bool empty() const { return size_.load(std::memory_order_relaxed) == 0; }

  // The graph pools' free parts counted on, by device ordinal.
  FreePartPromises& promises() { return promises_; }

  // Held while a device's pool entry in the AllocationTable is settled.
  std::mutex& settle_mutex() { return settle_mu_; }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, Entry> execs_;
  FreePartPromises promises_;
  std::atomic<size_t> size_{0};
  std::mutex settle_mu_;
};

}  // namespace egpu::shim
