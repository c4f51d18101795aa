// The one way the agent writes an instance's slot (pages.h): its grant in
// the GPU page, which its shims read through gpu_page_io.h, and its record
// in the record page, which the agent reads back after a restart. At create
// and at every change.
// Only agents write the GPU page, so a value out of range is damage, not an
// attack: the reader drops what it cannot trust and says why.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "core/model/instance_registry.h"
#include "core/shm/pages.h"
#include "core/util/result.h"

namespace egpu::shm {

// Records `inst` in its slot (inst.slot) of both pages and marks the record
// active; the record is complete before the grant names the instance, and
// the grant's id is stored last, so a shim that sees its id sees its units.
// mem_limit is left alone: it has its own protocol (set_mem_limit).
void write_slot_control(SlotRecord& record, SlotGrant& grant, const model::Instance& inst);

// Frees a slot: the grant first, so shims whose id it held see at once that
// the instance is gone, then the record.
void free_slot_control(SlotRecord& record, SlotGrant& grant);

// What the shims enforce for memory (bytes, or kNoMemLimit). seq_cst: it is
// ordered before the agent's following read of the use (core/quota).
inline void set_mem_limit(SlotGrant& c, uint64_t bytes) {
  c.mem_limit.store(bytes, std::memory_order_seq_cst);
}

// The instance an active slot records (slot `slot` of GPU `gpu`); an error
// naming the damage for one that cannot be recovered, and nullopt for a free
// slot. A damaged objective alone is dropped with `warning` set.
struct RecoveredSlot {
  model::Instance instance;
  std::string warning;  // empty when every field was in range
};
Result<std::optional<RecoveredSlot>> read_slot_control(const SlotRecord& c, uint32_t gpu,
                                                       uint32_t slot);

}  // namespace egpu::shm
