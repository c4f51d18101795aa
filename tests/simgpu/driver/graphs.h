// Stream capture support shared by every op-submitting call: while a stream
// captures, its work goes into the capture graph instead of the device.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "driver/handles.h"

namespace egpu::simgpu::driver {

// If `stream` is capturing, adds `duration_ns` of work to its graph and
// returns true; the caller then submits nothing.
bool capture_if_capturing(CUstream_st* stream, uint64_t duration_ns);

// Appends a node to `graph` (node_out may be null: a captured node).
CUresult add_graph_node(CUgraphNode* node_out, CUgraph_st* graph, CUgraphNodeType type,
                        uint64_t duration_ns, const GraphAllocation& memory);

// The duration a kernel launch declares: its first parameter (uint64 ns), from
// kernelParams or else from a CU_LAUNCH_PARAM_BUFFER_POINTER in `extra`.
uint64_t kernel_duration_ns(void** kernel_params, void** extra);

}  // namespace egpu::simgpu::driver
