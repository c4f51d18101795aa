// Graph memory nodes and the graph pool's device queries (CUDA 11.4):
// explicit alloc and free nodes, their parameters, the pool's figures and
// its trim. Stream-ordered allocations captured into a graph become such
// nodes too (api_memory_vmm.cc).
#include "driver/cuda_api.h"
// after cuda.h:
#include <cstring>

#include "driver/driver_state.h"
#include "driver/graph_memory.h"
#include "driver/graphs.h"

using egpu::simgpu::driver::GraphAllocation;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

CUresult device_ordinal(CUdevice device, int* ordinal) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (!drv::valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *ordinal = device;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                const CUgraphNode* dependencies, size_t numDependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  (void)dependencies;
  (void)numDependencies;
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUgraph_st* graph = registry().find<CUgraph_st>(hGraph);
    if (graph == nullptr || phGraphNode == nullptr || nodeParams == nullptr ||
        nodeParams->bytesize == 0 ||
        nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !drv::valid_device(nodeParams->poolProps.location.id)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const int ordinal = nodeParams->poolProps.location.id;
    GraphAllocation memory{drv::new_graph_address(ordinal, nodeParams->bytesize),
                           nodeParams->bytesize, ordinal};
    nodeParams->dptr = memory.address;
    return drv::add_graph_node(phGraphNode, graph, CU_GRAPH_NODE_TYPE_MEM_ALLOC, 0, memory);
  });
}

CUresult cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                               const CUgraphNode* dependencies, size_t numDependencies,
                               CUdeviceptr dptr) {
  (void)dependencies;
  (void)numDependencies;
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUgraph_st* graph = registry().find<CUgraph_st>(hGraph);
    GraphAllocation memory;
    if (graph == nullptr || phGraphNode == nullptr || !drv::find_graph_allocation(dptr, &memory))
      return CUDA_ERROR_INVALID_VALUE;
    return drv::add_graph_node(phGraphNode, graph, CU_GRAPH_NODE_TYPE_MEM_FREE, 0, memory);
  });
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS* params_out) {
  return guarded([&] {
    const CUgraphNode_st* node = registry().find<CUgraphNode_st>(hNode);
    if (node == nullptr || params_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
      return CUDA_ERROR_INVALID_VALUE;
    std::memset(params_out, 0, sizeof(*params_out));
    params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params_out->poolProps.location.id = node->memory.ordinal;
    params_out->bytesize = node->memory.bytes;
    params_out->dptr = node->memory.address;
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr* dptr_out) {
  return guarded([&] {
    const CUgraphNode_st* node = registry().find<CUgraphNode_st>(hNode);
    if (node == nullptr || dptr_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEM_FREE)
      return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = node->memory.address;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  return guarded([&] {
    int ordinal = 0;
    if (const CUresult rc = device_ordinal(device, &ordinal); rc != CUDA_SUCCESS) return rc;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    uint64_t figure = 0;
    const CUresult rc = drv::graph_memory_attribute(ordinal, attr, &figure);
    if (rc == CUDA_SUCCESS) *static_cast<cuuint64_t*>(value) = figure;
    return rc;
  });
}

// Only the highs can be set, and only to 0 (which resets them).
CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  return guarded([&] {
    int ordinal = 0;
    if (const CUresult rc = device_ordinal(device, &ordinal); rc != CUDA_SUCCESS) return rc;
    if (value == nullptr || *static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
    return drv::reset_graph_memory_high(ordinal, attr);
  });
}

CUresult cuDeviceGraphMemTrim(CUdevice device) {
  return guarded([&] {
    int ordinal = 0;
    if (const CUresult rc = device_ordinal(device, &ordinal); rc != CUDA_SUCCESS) return rc;
    return drv::trim_graph_memory(ordinal);
  });
}

}  // extern "C"
