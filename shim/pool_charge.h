// What the graph pools (graph_memory.h) and the stream-ordered memory pools
// (pool_memory.h) share: the driver keeps a pool's memory after it is freed,
// so the instance is charged each pool's size as the driver reports it,
// settled after every call that may change it; an allocation that the
// pool's free part cannot hold reserves the rest against the quota first.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "shim/allocation_table.h"
#include "shim/free_part_promises.h"
#include "shim/memory_accounting.h"

namespace egpu::shim {

// Held between the check before a call that may grow pools and the
// settling after it.
struct PoolTicket {
  std::vector<std::pair<uint64_t, int>> pools;          // (pool key, device ordinal) to settle
  std::vector<Reservation> held;                        // quota reserved for growth
  std::vector<std::pair<uint64_t, uint64_t>> promised;  // (pool key, free part counted on)
};

// The driver's figure for a pool: what it holds (false: it cannot say).
using PoolFigure = bool (*)(uint64_t key, uint64_t* bytes);

// One kind of pool: where its charge is kept and how the driver is asked;
// `known` (if set) says, under the settle mutex, that the pool still exists
// (a destroyed pool's handle is never passed to the driver).
struct PoolKind {
  AllocationKind kind;
  PoolFigure reserved;
  PoolFigure used;
  bool (*known)(ProcessState& s, uint64_t key) = nullptr;
};

// The instance holds more than its quota on b's device (growth the driver
// chose past the check): no free part is credited, nothing more admitted.
bool over_quota(const GpuBinding& b);

// The instance holds for pool `key` on b's device what the driver reports it
// holds, or (when it cannot say) what it held plus what `ticket` reserved
// for it on the current attachment. Growth the driver chose past the quota
// is charged anyway: the instance's next allocations are refused. Without
// a ticket, a pool with an admission in flight is left to that admission's
// settling (its reservation is not in the pool's charge yet).
void settle_pool_charge(ProcessState& s, GpuBinding& b, const PoolKind& kind, uint64_t key,
                        std::mutex& settle_mu, const FreePartPromises& promises,
                        const PoolTicket* ticket);

// Before the driver takes `bytes` for pool `key` on b's device: the pool's
// free part that no other call in flight counts on is used first, the rest
// reserved against the quota; the pool joins the ticket's pools to settle.
// The free part counts only while the instance is within its quota: the
// driver may grow a pool rather than reuse what it has free (memory freed
// on another stream, fragments), and that growth is charged after the fact,
// so an instance over its quota gets no more of it. False when it does not
// fit: the caller then cancels the ticket.
bool admit_to_pool(ProcessState& s, GpuBinding& b, const PoolKind& kind, uint64_t key,
                   FreePartPromises& promises, uint64_t bytes, PoolTicket* ticket);

// Gives back what `ticket` reserved and counted on (a refusal, a failed
// call), and ends its admissions; cancel_pool_ticket empties it too.
void release_pool_ticket(FreePartPromises& promises, const PoolTicket& ticket) noexcept;
void cancel_pool_ticket(FreePartPromises& promises, PoolTicket* ticket) noexcept;
// The ticket's admissions are over (after its settling): whatever happened
// there, or a pool would stay in flight and never be settled again.
void end_admissions(FreePartPromises& promises, const PoolTicket& ticket) noexcept;

}  // namespace egpu::shim
