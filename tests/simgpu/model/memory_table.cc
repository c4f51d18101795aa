#include "model/memory_table.h"

#include <algorithm>

namespace egpu::simgpu {
namespace {

constexpr uint64_t kAddressAlignment = 512;  // cuMemAlloc aligns at least to 256 bytes

bool entry_live(const Allocation& a) {
  return a.kind != static_cast<uint32_t>(AllocationKind::kFree);
}

void free_entry(DeviceMemory& mem, Allocation& a) {
  // Kind last: until then the entry still counts, so used_bytes is never
  // lower than the live entries say (repair_memory recomputes it anyway).
  mem.used_bytes -= std::min(mem.used_bytes, a.size);
  a.kind = static_cast<uint32_t>(AllocationKind::kFree);
}

}  // namespace

void init_memory(DeviceMemory& mem, uint64_t total_bytes, uint64_t base_address,
                 uint64_t address_limit) {
  mem.total_bytes = total_bytes;
  mem.used_bytes = 0;
  mem.next_address = base_address;
  mem.address_limit = address_limit;
  mem.high_water = 0;
}

AllocResult allocate(DeviceMemory& mem, uint64_t size, AllocationKind kind,
                     const AllocOwner& owner) {
  if (size == 0 || kind == AllocationKind::kFree) return {AllocStatus::kInvalidSize, 0};
  if (size > mem.total_bytes || mem.used_bytes > mem.total_bytes - size) {
    return {AllocStatus::kOutOfMemory, 0};
  }
  const uint64_t span = (size + kAddressAlignment - 1) / kAddressAlignment * kAddressAlignment;
  if (span < size || mem.next_address > mem.address_limit ||
      mem.address_limit - mem.next_address < span) {
    return {AllocStatus::kAddressSpaceExhausted, 0};
  }
  uint32_t index = 0;
  while (index < mem.high_water && entry_live(mem.entries[index]))
    ++index;
  if (index >= kMaxAllocations) return {AllocStatus::kTableFull, 0};

  Allocation& a = mem.entries[index];
  a.address = mem.next_address;
  a.size = size;
  a.owner_slot = owner.slot;
  a.owner_generation = owner.generation;
  a.owner_pid = owner.pid;
  mem.next_address += span;
  if (index == mem.high_water) mem.high_water = index + 1;
  a.kind = static_cast<uint32_t>(kind);  // publishes the entry
  mem.used_bytes += size;
  return {AllocStatus::kOk, a.address};
}

uint64_t release_address(DeviceMemory& mem, uint64_t address, int32_t pid) {
  for (uint32_t i = 0; i < mem.high_water; ++i) {
    Allocation& a = mem.entries[i];
    if (entry_live(a) && a.address == address && a.owner_pid == pid) {
      const uint64_t size = a.size;
      free_entry(mem, a);
      return size;
    }
  }
  return 0;
}

uint64_t release_owner(DeviceMemory& mem, int32_t slot, uint32_t generation) {
  uint64_t freed = 0;
  for (uint32_t i = 0; i < mem.high_water; ++i) {
    Allocation& a = mem.entries[i];
    if (entry_live(a) && a.owner_slot == slot && a.owner_generation == generation) {
      freed += a.size;
      free_entry(mem, a);
    }
  }
  return freed;
}

const Allocation* find_allocation(const DeviceMemory& mem, uint64_t address) {
  for (uint32_t i = 0; i < mem.high_water; ++i) {
    const Allocation& a = mem.entries[i];
    if (entry_live(a) && address >= a.address && address - a.address < a.size) return &a;
  }
  return nullptr;
}

uint64_t free_bytes(const DeviceMemory& mem) {
  return mem.total_bytes > mem.used_bytes ? mem.total_bytes - mem.used_bytes : 0;
}

void repair_memory(DeviceMemory& mem) {
  uint64_t used = 0;
  uint32_t high = 0;
  for (uint32_t i = 0; i < std::min(mem.high_water + 1, kMaxAllocations); ++i) {
    if (entry_live(mem.entries[i])) {
      used += mem.entries[i].size;
      high = i + 1;
    }
  }
  mem.used_bytes = used;
  mem.high_water = high;
}

}  // namespace egpu::simgpu
