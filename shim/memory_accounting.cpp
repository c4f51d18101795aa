#include "shim/memory_accounting.h"

#include "core/quota/memory_quota.h"
#include "shim/fast_clock.h"
#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

// The limit the agent publishes (shm::kNoMemLimit: account, never refuse).
const std::atomic<uint64_t>& limit_of(const Attachment& a) {
  return a.control().mem_limit;
}

// The instance's lock is stuck (a stopped process of the job holds it):
// allocations are accounted without the check rather than blocked or refused.
void log_lock_unavailable(const Attachment& a) {
  EGPU_SHIM_LOG_ONCE(
      "instance %llu: its allocation lock is unavailable; allocations are accounted without the "
      "quota check",
      static_cast<unsigned long long>(a.instance_id));
}

}  // namespace

Admission reserve_memory(ProcessState& s, GpuBinding& b, uint64_t bytes, Reservation* r) {
  r->ordinal = b.ordinal();
  r->bytes = bytes;
  Attachment* a = s.ensure_attached(b, launch_clock_ns());
  if (a == nullptr) {  // unattached: the fail mode applies (said at attach)
    return s.refuses_unattached() ? Admission::kDenied : Admission::kGranted;
  }
  switch (quota::reserve_or_account(a->instance, a->proc_slot, bytes, limit_of(*a))) {
    case quota::Reservation::kGranted:
      r->attachment = a;
      return Admission::kGranted;
    case quota::Reservation::kOverQuota:
      a->me.count_mem_denied();
      log_line(
          "GPU %u: allocation of %llu bytes refused: instance %llu holds %llu of its "
          "%llu-byte memory quota",
          b.physical_index(), static_cast<unsigned long long>(bytes),
          static_cast<unsigned long long>(a->instance_id),
          static_cast<unsigned long long>(quota::used(a->instance)),
          static_cast<unsigned long long>(limit_of(*a).load(std::memory_order_relaxed)));
      return Admission::kDenied;
    case quota::Reservation::kLockUnavailable:
      break;
  }
  log_lock_unavailable(*a);
  r->attachment = a;
  return Admission::kGranted;
}

bool resize_reservation(Reservation* r, uint64_t bytes) {
  Attachment* a = r->attachment;
  if (a != nullptr && bytes > r->bytes) {
    const uint64_t more = bytes - r->bytes;
    switch (quota::reserve_or_account(a->instance, a->proc_slot, more, limit_of(*a))) {
      case quota::Reservation::kGranted:
        break;
      case quota::Reservation::kOverQuota:
        a->me.count_mem_denied();
        return false;
      case quota::Reservation::kLockUnavailable:
        log_lock_unavailable(*a);
        break;
    }
  } else if (a != nullptr && bytes < r->bytes) {
    quota::release(a->instance, a->proc_slot, r->bytes - bytes);
  }
  r->bytes = bytes;
  return true;
}

void cancel_reservation(const Reservation& r) {
  if (r.attachment != nullptr)
    quota::release(r.attachment->instance, r.attachment->proc_slot, r.bytes);
}

void release_allocation(ProcessState& s, const LiveAllocation& freed) {
  GpuBinding* b = s.binding(freed.ordinal);
  if (b == nullptr) return;
  // The current attachment: after a re-attach its slot was set to the live
  // total, which includes this allocation.
  if (Attachment* a = b->attachment()) quota::release(a->instance, a->proc_slot, freed.bytes);
}

uintptr_t current_context_key() noexcept {
  const auto get_current = EGPU_REAL(cuCtxGetCurrent);
  CUcontext ctx = nullptr;
  if (get_current == nullptr || get_current(&ctx) != CUDA_SUCCESS) return 0;
  return reinterpret_cast<uintptr_t>(ctx);
}

void remember_allocation(ProcessState& s, AllocationKind kind, uint64_t key,
                         const LiveAllocation& allocation) {
  if (auto replaced = s.allocations().insert(kind, key, allocation))
    release_allocation(s, *replaced);
}

void release_context_allocations(uintptr_t context) noexcept {
  ProcessState* s = managed_state();
  if (s == nullptr || context == 0) return;
  try {
    for (const LiveAllocation& freed : s->allocations().take_context(context))
      release_allocation(*s, freed);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error while releasing a context's memory: accounting may be off");
  }
}

}  // namespace egpu::shim
