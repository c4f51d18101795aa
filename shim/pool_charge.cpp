#include "shim/pool_charge.h"

#include "core/quota/memory_quota.h"
#include "shim/fast_clock.h"

namespace egpu::shim {

void settle_pool_charge(ProcessState& s, GpuBinding& b, const PoolKind& kind, uint64_t key,
                        std::mutex& settle_mu, const FreePartPromises& promises,
                        const PoolTicket* ticket) {
  if (ticket == nullptr && promises.in_flight(key)) return;
  const int ordinal = b.ordinal();
  // Attached before the entry is taken: a first attach counts the live
  // allocations, this pool's entry among them.
  Attachment* a = s.ensure_attached(b, launch_clock_ns());
  uint64_t extra = 0;
  if (ticket != nullptr) {
    for (const Reservation& r : ticket->held) {
      // One reserved on an attachment replaced since (the agent restarted)
      // is not in the new one's count.
      if (r.ordinal == ordinal && r.attachment != nullptr && r.attachment == a) extra += r.bytes;
    }
  }
  const std::lock_guard lock(settle_mu);
  if (kind.known != nullptr && !kind.known(s, key)) return;
  uint64_t reported = 0;
  const bool known = kind.reserved(key, &reported);
  // Found and replaced, never taken: a re-attach meanwhile counts it.
  const auto entry = s.allocations().find(kind.kind, key);
  const uint64_t held = (entry ? entry->bytes : 0) + extra;
  const uint64_t target = known ? reported : held;
  if (target > held && a != nullptr) {
    quota::add_unchecked(a->instance, a->proc_slot, target - held);
  } else if (target < held) {
    release_allocation(s, LiveAllocation{held - target, ordinal});
  }
  if (target > 0) {
    s.allocations().insert(kind.kind, key, LiveAllocation{target, ordinal});
  } else if (entry) {
    s.allocations().take(kind.kind, key);
  }
}

bool over_quota(const GpuBinding& b) {
  const Attachment* a = b.attachment();
  return a != nullptr &&
         quota::used(a->instance) > a->control().mem_limit.load(std::memory_order_relaxed);
}

bool admit_to_pool(ProcessState& s, GpuBinding& b, const PoolKind& kind, uint64_t key,
                   FreePartPromises& promises, uint64_t bytes, PoolTicket* ticket) {
  ticket->held.reserve(ticket->held.size() + 1);
  ticket->promised.reserve(ticket->promised.size() + 1);
  ticket->pools.emplace_back(key, b.ordinal());
  uint64_t reserved = 0, used = 0;
  uint64_t free_part = kind.reserved(key, &reserved) && kind.used(key, &used) && reserved > used
                           ? reserved - used
                           : 0;
  if (over_quota(b)) free_part = 0;
  const uint64_t reused = promises.promise(key, free_part, bytes);
  ticket->promised.emplace_back(key, reused);
  if (bytes == reused) return true;
  Reservation r;
  if (reserve_memory(s, b, bytes - reused, &r) == Admission::kDenied) return false;
  ticket->held.push_back(r);
  return true;
}

void end_admissions(FreePartPromises& promises, const PoolTicket& ticket) noexcept {
  for (const auto& [key, promised] : ticket.promised) {
    try {
      promises.unpromise(key, promised);
    } catch (...) {
      EGPU_SHIM_LOG_ONCE("internal error ending a pool admission: that pool is settled no more");
    }
  }
}

void release_pool_ticket(FreePartPromises& promises, const PoolTicket& ticket) noexcept {
  for (const Reservation& held : ticket.held)
    cancel_reservation(held);
  end_admissions(promises, ticket);
}

void cancel_pool_ticket(FreePartPromises& promises, PoolTicket* ticket) noexcept {
  release_pool_ticket(promises, *ticket);
  ticket->held.clear();
  ticket->promised.clear();
  ticket->pools.clear();
}

}  // namespace egpu::shim
