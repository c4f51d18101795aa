// Per-device memory accounting in the shared segment: a table of live
// allocations and a bump pointer for addresses (never reused, so a stale
// pointer can never alias a new allocation). No backing store.
#pragma once

#include <cstdint>

#include "model/layout.h"

namespace egpu::simgpu {

void init_memory(DeviceMemory& mem, uint64_t total_bytes, uint64_t base_address,
                 uint64_t address_limit);

enum class AllocStatus { kOk, kInvalidSize, kOutOfMemory, kTableFull, kAddressSpaceExhausted };

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

// Releases the allocation starting at `address` owned by process `pid`.
// Returns its size, or 0 when there is no such allocation.
uint64_t release_address(DeviceMemory& mem, uint64_t address, int32_t pid);

// Releases every allocation of one context; returns the bytes freed.
uint64_t release_owner(DeviceMemory& mem, int32_t slot, uint32_t generation);

// The live allocation containing `address`, or nullptr.
const Allocation* find_allocation(const DeviceMemory& mem, uint64_t address);

uint64_t free_bytes(const DeviceMemory& mem);

// Rebuilds used_bytes and high_water from the entries (after a holder died).
void repair_memory(DeviceMemory& mem);

}  // namespace egpu::simgpu
