// Per-device memory accounting in the shared segment: a table of live
// allocations and a bump pointer for addresses (never reused, so a stale
// pointer can never alias a new allocation). No backing store.
// Imports (IPC, pool pointers, VMM shareable handles) are entries of their
// own that keep their target alive: like the driver, device memory is freed
// at the last reference. A target its owner frees while imported is orphaned
// (owner_slot -1): still charged, freed when its last import ends.
#pragma once

#include <cstdint>
#include <optional>

#include "model/layout.h"

namespace egpu::simgpu {

void init_memory(DeviceMemory& mem, uint64_t total_bytes, uint64_t base_address,
                 uint64_t address_limit);

enum class AllocStatus {
  kOk,
  kInvalidSize,
  kOutOfMemory,
  kTableFull,
  kAddressSpaceExhausted,
  kNotFound,
};

bool is_import(uint32_t kind);

struct AllocResult {
  AllocStatus status;
  uint64_t address;
};

struct AllocOwner {
  int32_t slot;
  uint32_t generation;
  int32_t pid;
};

// Accounts `size` bytes (> 0) against the device total and hands out a fresh
// address. Fails without side effects when it does not fit.
AllocResult allocate(DeviceMemory& mem, uint64_t size, AllocationKind kind,
                     const AllocOwner& owner);

// Maps the allocation starting at `target` for `owner`: a new entry of
// `kind` (an import kind) with a fresh address and the target's size,
// charged nothing. kNotFound unless the target is a live allocation (not an
// import) that is owned, or orphaned when `allow_orphaned`.
AllocResult import_allocation(DeviceMemory& mem, uint64_t target, AllocationKind kind,
                              const AllocOwner& owner, bool allow_orphaned);

// Ends the entry starting at `address` owned by process `pid`: of kind
// `only` if given, else any kind but IPC and VMM imports (which have calls
// of their own; cuMemFree ends pool imports). An allocation still imported
// is orphaned, not freed. Returns its size, or 0 when there is no such entry.
uint64_t release_address(DeviceMemory& mem, uint64_t address, int32_t pid,
                         std::optional<AllocationKind> only = std::nullopt);

// Ends every entry of one context; returns the device bytes freed.
uint64_t release_owner(DeviceMemory& mem, int32_t slot, uint32_t generation);

// The live allocation containing `address`, or nullptr.
const Allocation* find_allocation(const DeviceMemory& mem, uint64_t address);

uint64_t free_bytes(const DeviceMemory& mem);

// Rebuilds used_bytes, high_water and import counts from the entries (after
// a holder died), freeing orphans nothing imports any more.
void repair_memory(DeviceMemory& mem);

}  // namespace egpu::simgpu
