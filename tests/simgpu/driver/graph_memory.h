// Graph memory (CUDA 11.4's memory nodes): a graph allocation has its address
// from the moment its node is made; device memory is mapped to the graph at
// its first launch (or upload) and stays mapped across launches, freed or
// not, until the graph is destroyed. It comes from the process's graph pool
// on the device, which grows when its unmapped part is too small and keeps
// what it grew until cuDeviceGraphMemTrim: a process holds device memory
// through graphs that none of its allocations shows.
// The backing belongs to the context that launched; when that context is
// destroyed the pool loses it and its allocations.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>
#include <vector>

#include "driver/handles.h"

namespace egpu::simgpu::driver {

// A fresh address for a graph allocation of `bytes` on device `ordinal`.
uint64_t new_graph_address(int ordinal, uint64_t bytes);
// The graph allocation starting at `address`, mapped or not.
bool find_graph_allocation(uint64_t address, GraphAllocation* out);

// A launch (`map`) or an upload of `exec`: its first maps its allocations,
// growing each device's pool to hold them on top of what is mapped already
// (backed by device memory through ctx's process); they stay mapped to the
// graph until it is destroyed. A launch then allocates them and frees what
// the graph frees. CUDA_ERROR_INVALID_VALUE if an allocation is still live
// from an earlier launch, CUDA_ERROR_OUT_OF_MEMORY if a device is full
// (nothing changes then).
CUresult run_graph_memory(CUctx_st* ctx, CUgraphExec_st* exec, bool map);
// cuGraphExecDestroy: its mappings go back to the pool (a live allocation's
// when it is freed).
void forget_graph_exec(const CUgraphExec_st* exec);

// cuMemFree(Async) outside a graph: true if `address` is a graph
// allocation, with *rc CUDA_SUCCESS or, if it is not mapped,
// CUDA_ERROR_INVALID_VALUE.
bool free_graph_allocation(uint64_t address, CUresult* rc);

// cuDeviceGetGraphMemAttribute / cuDeviceSetGraphMemAttribute (the highs
// reset to the current figures) / cuDeviceGraphMemTrim, for `ordinal`.
CUresult graph_memory_attribute(int ordinal, CUgraphMem_attribute attr, uint64_t* value);
CUresult reset_graph_memory_high(int ordinal, CUgraphMem_attribute attr);
CUresult trim_graph_memory(int ordinal);

// `ctx` is destroyed (the memory table freed its entries).
void forget_graph_memory(const CUctx_st* ctx);

}  // namespace egpu::simgpu::driver
