// Memory quota accounting around the allocation paths: reserve on the instance
// page BEFORE the driver allocates (refused -> CUDA_ERROR_OUT_OF_MEMORY without
// calling it), release on a driver failure or a free, and remember every live
// allocation so that a free releases exactly what was reserved.
#pragma once

#include <cstdint>

#include "shim/allocation_table.h"
#include "shim/call_counters.h"
#include "shim/log.h"
#include "shim/process_state.h"

namespace egpu::shim {

// What reserve_memory decided.
enum class Admission { kGranted, kDenied };

struct Reservation {
  Attachment* attachment = nullptr;  // where it was reserved; null: not accounted
  int ordinal = -1;
  uint64_t bytes = 0;
};

// Reserves `bytes` on binding `b` (attaching first if needed).
Admission reserve_memory(ProcessState& s, GpuBinding& b, uint64_t bytes, Reservation* r);
// Grows or shrinks a granted reservation to `bytes` (pitch allocations learn
// their size from the driver); false if growing went over the quota.
bool resize_reservation(Reservation* r, uint64_t bytes);
// The driver failed: give the reservation back.
void cancel_reservation(const Reservation& r);
// A freed allocation's bytes, released from its GPU's current attachment.
void release_allocation(ProcessState& s, const LiveAllocation& freed);
// The calling thread's current context, as LiveAllocation::context (0: none).
uintptr_t current_context_key() noexcept;
// Records a new allocation; an entry it replaces was freed by the driver
// unseen (its context ended), so its bytes are given back.
void remember_allocation(ProcessState& s, AllocationKind kind, uint64_t key,
                         const LiveAllocation& allocation);
// The driver destroyed `context` and freed everything allocated in it.
void release_context_allocations(uintptr_t context) noexcept;

// -2 = the binding of the current context.
inline constexpr int kCurrentDevice = -2;

// The common shape of every allocation wrapper.
template <typename RealAlloc, typename KeyOf>
CUresult accounted_alloc(RealId id, int ordinal, uint64_t bytes, AllocationKind kind,
                         RealAlloc&& alloc, KeyOf&& key_of) noexcept {
  ProcessState* s = process_state();
  note_call(id);
  if (s == nullptr || !s->usable()) return alloc();
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    GpuBinding* b = ordinal == kCurrentDevice ? s->current_binding() : s->binding(ordinal);
    if (b == nullptr) {
      called = true;
      return result = alloc();
    }
    Reservation r;
    if (reserve_memory(*s, *b, bytes, &r) == Admission::kDenied) return CUDA_ERROR_OUT_OF_MEMORY;
    called = true;
    result = alloc();
    if (result != CUDA_SUCCESS) {
      cancel_reservation(r);
      return result;
    }
    remember_allocation(*s, kind, key_of(), {r.bytes, r.ordinal, current_context_key()});
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in an allocation path: passing it through unaccounted");
    return called ? result : alloc();
  }
}

// The common shape of every free wrapper.
template <typename RealFree>
CUresult accounted_free(RealId id, AllocationKind kind, uint64_t key, RealFree&& free_fn) noexcept {
  ProcessState* s = process_state();
  note_call(id);
  if (s == nullptr || !s->usable()) return free_fn();
  std::optional<LiveAllocation> freed;
  try {
    freed = s->allocations().take(kind, key);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a free path: passing it through");
  }
  const CUresult result = free_fn();
  if (!freed) return result;
  try {
    if (result != CUDA_SUCCESS) {
      s->allocations().insert(kind, key, *freed);  // still allocated
    } else {
      release_allocation(*s, *freed);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in a free path: accounting may be off");
  }
  return result;
}

}  // namespace egpu::shim
