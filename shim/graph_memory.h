// Graph memory: allocations made by a graph's memory nodes
// (cuGraphAddMemAllocNode, or stream-ordered allocations captured into a
// graph). The driver maps them at a graph's first launch (or upload) from
// the process's graph pool on the device; the memory stays mapped to the
// graph across launches, and the pool keeps it, freed or not, until
// cuDeviceGraphMemTrim. So the quota counts the pool rather than the
// allocations: a graph's first launch or upload is refused with
// CUDA_ERROR_OUT_OF_MEMORY (the driver never sees it) when what it allocates,
// beyond the pool's free part that no other launch in flight counts on, does
// not fit in the quota; after every launch, upload, trim or context end the
// instance holds exactly the pool's size as the driver reports it (growth
// the driver chose beyond the check is charged then, so the instance's next
// allocations are refused). Captured stream-ordered allocations and frees
// are not accounted themselves.
#pragma once

#include "shim/cuda_api.h"
// after cuda.h:
#include <cstdint>
#include <utility>
#include <vector>

#include "shim/graph_exec_table.h"
#include "shim/pool_charge.h"

namespace egpu::shim {

// Read from the driver: the memory-alloc nodes of `graph` and of the graphs
// nested in it, each distinct address once at its largest size (empty if
// none or if the driver cannot say). False on an internal error.
bool graph_allocations(CUgraph graph, GraphAllocations* out) noexcept;

// Before the driver maps `allocations` (`mapped`: they are mapped already
// and need nothing new): false, with nothing held, when they do not fit.
bool admit_graph_memory(const GraphAllocations& allocations, bool mapped,
                        PoolTicket* ticket) noexcept;
// After the driver's call, whatever it returned.
void settle_graph_memory(const PoolTicket& ticket) noexcept;
// The pool on `ordinal` may have changed (a trim, a primary context's end).
void settle_graph_pool(int ordinal) noexcept;
// Every pool the instance holds memory for (a context was destroyed).
void settle_graph_pools() noexcept;

}  // namespace egpu::shim
