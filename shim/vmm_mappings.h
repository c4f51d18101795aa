// VmmMappings: the physical allocations behind VMM handles the shim accounts,
// with the driver's lifetime rule: the memory is freed only when every handle
// reference (cuMemCreate / import, each cuMemRetainAllocationHandle) was
// released AND no mapping of it remains. Until then its bytes stay accounted.
// Each allocation has a serial of the shim's own (its key in the
// AllocationTable): a handle value can be reused by the driver once released,
// while the old memory is still mapped. Thread-safe; never calls the driver.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace egpu::shim {

class VmmMappings {
 public:
  struct Physical {
    uint64_t serial = 0;
    int ordinal = 0;
    uint64_t bytes = 0;  // accounted; for an import, the most mapped from it
    bool imported = false;
    uint32_t refs = 0;      // handle references not yet released
    uint32_t mappings = 0;  // live mapped ranges
  };
  // A release or unmap in progress: undone if the driver refuses it, else
  // `dead` lists the allocations whose memory the driver has now freed.
  struct Pending {
    uint64_t handle = 0;
    std::optional<uint64_t> serial;                     // the released reference (release only)
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // removed mappings: start -> serial
    std::vector<uint64_t> sizes;
    std::vector<Physical> dead;
  };

  // A new handle from cuMemCreate (bytes known) or an import (bytes = 0); its serial.
  uint64_t add_handle(uint64_t handle, int ordinal, uint64_t bytes, bool imported);
  // The allocation behind a live handle value.
  std::optional<Physical> find_handle(uint64_t handle) const;
  // The allocation mapped at an address inside [start, start + size).
  std::optional<Physical> find_mapped(uint64_t address) const;

  // cuMemMap succeeded: records the range; an import's bytes grow to
  // `grow_to` if that is more. Returns the growth applied (0 if none or if
  // the allocation is gone).
  uint64_t add_mapping(uint64_t serial, uint64_t start, uint64_t size, uint64_t grow_to);
  // cuMemRetainAllocationHandle returned `handle` for `address`: one more reference.
  bool retain(uint64_t handle, uint64_t address);

  // Before cuMemRelease / cuMemUnmap; nothing if the handle/range is not tracked.
  Pending begin_release(uint64_t handle);
  Pending begin_unmap(uint64_t start, uint64_t size);
  // The driver refused: puts everything back.
  void undo(const Pending& p);

  size_t size() const;

 private:
  // Moves `serial` to `dead` if nothing references it any more.
  void collect_if_dead(uint64_t serial, Pending* p);

  mutable std::mutex mu_;
  uint64_t next_serial_ = 1;
  std::unordered_map<uint64_t, Physical> physical_;  // by serial
  std::unordered_map<uint64_t, uint64_t> handles_;   // live handle value -> serial
  struct Range {
    uint64_t size;
    uint64_t serial;
  };
  std::map<uint64_t, Range> ranges_;  // mapped start -> range
};

}  // namespace egpu::shim
