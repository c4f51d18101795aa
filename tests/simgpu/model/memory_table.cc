#include "model/memory_table.h"

#include <algorithm>
#include <unordered_map>

namespace egpu::simgpu {
namespace {

constexpr uint64_t kAddressAlignment = 512;  // cuMemAlloc aligns at least to 256 bytes

bool entry_live(const Allocation& a) {
  return a.kind != static_cast<uint32_t>(AllocationKind::kFree);
}

// Imports are mappings of memory charged to their target.
bool charged(const Allocation& a) {
  return entry_live(a) && !is_import(a.kind);
}

void free_entry(DeviceMemory& mem, Allocation& a) {
  // Kind last: until then the entry still counts, so used_bytes is never
  // lower than the live entries say (repair_memory recomputes it anyway).
  if (charged(a)) mem.used_bytes -= std::min(mem.used_bytes, a.size);
  a.kind = static_cast<uint32_t>(AllocationKind::kFree);
}

// The live allocation (not an import) starting at `address`.
Allocation* find_target(DeviceMemory& mem, uint64_t address) {
  for (uint32_t i = 0; i < mem.high_water; ++i) {
    Allocation& a = mem.entries[i];
    if (charged(a) && a.address == address) return &a;
  }
  return nullptr;
}

// Takes an address span and a table entry, or says why not.
AllocStatus claim_entry(DeviceMemory& mem, uint64_t size, uint32_t* index, uint64_t* address) {
  const uint64_t span = (size + kAddressAlignment - 1) / kAddressAlignment * kAddressAlignment;
  if (span < size || mem.next_address > mem.address_limit ||
      mem.address_limit - mem.next_address < span) {
    return AllocStatus::kAddressSpaceExhausted;
  }
  uint32_t i = 0;
  while (i < mem.high_water && entry_live(mem.entries[i]))
    ++i;
  if (i >= kMaxAllocations) return AllocStatus::kTableFull;
  *index = i;
  *address = mem.next_address;
  mem.next_address += span;
  if (i == mem.high_water) mem.high_water = i + 1;
  return AllocStatus::kOk;
}

void fill_entry(Allocation& a, uint64_t address, uint64_t size, const AllocOwner& owner) {
  a.address = address;
  a.size = size;
  a.target = 0;
  a.owner_slot = owner.slot;
  a.owner_generation = owner.generation;
  a.owner_pid = owner.pid;
  a.import_refs = 0;
}

// Ends one entry: an import drops its target's reference (freeing an orphan
// at its last one); an allocation still imported is orphaned, else freed.
void end_entry(DeviceMemory& mem, Allocation& a) {
  if (is_import(a.kind)) {
    Allocation* target = find_target(mem, a.target);
    free_entry(mem, a);
    if (target != nullptr && target->import_refs > 0 && --target->import_refs == 0 &&
        target->owner_slot < 0) {
      free_entry(mem, *target);
    }
    return;
  }
  if (a.import_refs > 0) {
    a.owner_slot = -1;
    a.owner_generation = 0;
    a.owner_pid = 0;
    return;
  }
  free_entry(mem, a);
}

}  // namespace

bool is_import(uint32_t kind) {
  return kind == static_cast<uint32_t>(AllocationKind::kIpcImport) ||
         kind == static_cast<uint32_t>(AllocationKind::kPoolImport) ||
         kind == static_cast<uint32_t>(AllocationKind::kVmmImport);
}

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
  if (size == 0 || kind == AllocationKind::kFree || is_import(static_cast<uint32_t>(kind))) {
    return {AllocStatus::kInvalidSize, 0};
  }
  if (size > mem.total_bytes || mem.used_bytes > mem.total_bytes - size) {
    return {AllocStatus::kOutOfMemory, 0};
  }
  uint32_t index = 0;
  uint64_t address = 0;
  if (const AllocStatus s = claim_entry(mem, size, &index, &address); s != AllocStatus::kOk) {
    return {s, 0};
  }
  Allocation& a = mem.entries[index];
  fill_entry(a, address, size, owner);
  a.kind = static_cast<uint32_t>(kind);  // publishes the entry
  mem.used_bytes += size;
  return {AllocStatus::kOk, address};
}

AllocResult import_allocation(DeviceMemory& mem, uint64_t target, AllocationKind kind,
                              const AllocOwner& owner, bool allow_orphaned) {
  if (!is_import(static_cast<uint32_t>(kind))) return {AllocStatus::kInvalidSize, 0};
  Allocation* t = find_target(mem, target);
  if (t == nullptr || (t->owner_slot < 0 && !allow_orphaned)) return {AllocStatus::kNotFound, 0};
  uint32_t index = 0;
  uint64_t address = 0;
  if (const AllocStatus s = claim_entry(mem, t->size, &index, &address); s != AllocStatus::kOk) {
    return {s, 0};
  }
  Allocation& a = mem.entries[index];
  fill_entry(a, address, t->size, owner);
  a.target = target;
  ++t->import_refs;
  a.kind = static_cast<uint32_t>(kind);
  return {AllocStatus::kOk, address};
}

uint64_t release_address(DeviceMemory& mem, uint64_t address, int32_t pid,
                         std::optional<AllocationKind> only) {
  for (uint32_t i = 0; i < mem.high_water; ++i) {
    Allocation& a = mem.entries[i];
    if (!entry_live(a) || a.address != address || a.owner_pid != pid || a.owner_slot < 0) continue;
    const bool accepted = only ? a.kind == static_cast<uint32_t>(*only)
                               : a.kind != static_cast<uint32_t>(AllocationKind::kIpcImport) &&
                                     a.kind != static_cast<uint32_t>(AllocationKind::kVmmImport);
    if (!accepted) return 0;
    const uint64_t size = a.size;
    end_entry(mem, a);
    return size;
  }
  return 0;
}

uint64_t release_owner(DeviceMemory& mem, int32_t slot, uint32_t generation) {
  const uint64_t before = mem.used_bytes;
  for (uint32_t i = 0; i < mem.high_water; ++i) {
    Allocation& a = mem.entries[i];
    if (entry_live(a) && a.owner_slot == slot && a.owner_generation == generation) {
      end_entry(mem, a);
    }
  }
  return before - std::min(before, mem.used_bytes);
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
  const uint32_t scan = std::min(mem.high_water + 1, kMaxAllocations);
  std::unordered_map<uint64_t, uint32_t> targets;  // address -> index
  for (uint32_t i = 0; i < scan; ++i) {
    Allocation& a = mem.entries[i];
    if (!charged(a)) continue;
    a.import_refs = 0;
    targets[a.address] = i;
  }
  for (uint32_t i = 0; i < scan; ++i) {
    const Allocation& a = mem.entries[i];
    if (!entry_live(a) || !is_import(a.kind)) continue;
    if (const auto t = targets.find(a.target); t != targets.end()) {
      ++mem.entries[t->second].import_refs;
    }
  }
  uint64_t used = 0;
  uint32_t high = 0;
  for (uint32_t i = 0; i < scan; ++i) {
    Allocation& a = mem.entries[i];
    if (charged(a) && a.owner_slot < 0 && a.import_refs == 0) {
      a.kind = static_cast<uint32_t>(AllocationKind::kFree);
    }
    if (!entry_live(a)) continue;
    if (charged(a)) used += a.size;
    high = i + 1;
  }
  mem.used_bytes = used;
  mem.high_water = high;
}

}  // namespace egpu::simgpu
