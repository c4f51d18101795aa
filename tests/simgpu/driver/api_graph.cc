// CUDA graphs, simulated as one op each: a graph's duration is the sum of its
// kernel nodes' durations (their first parameter) or of the work a stream
// capture recorded. Nodes run one after another (conservative: no overlap).
// Memory nodes allocate from the graph pool at launch (driver/graph_memory.h).
#include "driver/cuda_api.h"
// after cuda.h:
#include <memory>

#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/graph_memory.h"
#include "driver/graphs.h"
#include "driver/streams.h"

using egpu::simgpu::driver::DefaultStream;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace egpu::simgpu::driver {

bool capture_if_capturing(CUstream_st* stream, uint64_t duration_ns) {
  CUgraph_st* graph = stream->capture_graph;
  if (graph == nullptr) return false;
  const std::lock_guard lock(graph->mutex);
  graph->duration_ns += duration_ns;
  return true;
}

CUresult add_graph_node(CUgraphNode* node_out, CUgraph_st* graph, CUgraphNodeType type,
                        uint64_t duration_ns, const GraphAllocation& memory) {
  auto node = std::make_unique<CUgraphNode_st>();
  node->graph = graph;
  node->type = type;
  node->duration_ns = duration_ns;
  node->memory = memory;
  CUgraphNode_st* raw = registry().adopt(std::move(node));
  const std::lock_guard lock(graph->mutex);
  graph->nodes.push_back(raw);
  graph->duration_ns += duration_ns;
  if (node_out != nullptr) *node_out = raw;
  return CUDA_SUCCESS;
}

}  // namespace egpu::simgpu::driver

namespace {

CUresult add_node(CUgraphNode* node_out, CUgraph handle, CUgraphNodeType type,
                  uint64_t duration_ns) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (node_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUgraph_st* graph = registry().find<CUgraph_st>(handle);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return drv::add_graph_node(node_out, graph, type, duration_ns, {});
}

// Under graph.mutex: the graph's memory nodes, its child graphs' included.
void collect_memory_nodes(const CUgraph_st& graph, CUgraphExec_st* exec) {
  for (const CUgraphNode_st* node : graph.nodes) {
    if (node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) exec->allocs.push_back(node->memory);
    if (node->type == CU_GRAPH_NODE_TYPE_MEM_FREE) exec->frees.push_back(node->memory.address);
    if (node->child != nullptr) {
      const std::lock_guard lock(node->child->mutex);
      collect_memory_nodes(*node->child, exec);
    }
  }
}

// A copy of `graph` (under its mutex), as a child-graph node holds it.
CUgraph_st* copy_graph(const CUgraph_st& graph) {
  CUgraph_st* copy = registry().adopt(std::make_unique<CUgraph_st>());
  for (const CUgraphNode_st* node : graph.nodes) {
    CUgraphNode out = nullptr;
    drv::add_graph_node(&out, copy, node->type, node->duration_ns, node->memory);
    if (node->child != nullptr) {
      const std::lock_guard lock(node->child->mutex);
      out->child = copy_graph(*node->child);
    }
  }
  return copy;
}

void destroy_graph(CUgraph_st* graph) {
  {
    const std::lock_guard lock(graph->mutex);
    for (CUgraphNode_st* node : graph->nodes) {
      if (node->child != nullptr) destroy_graph(node->child);
      registry().destroy(node);
    }
    graph->nodes.clear();
  }
  registry().destroy(graph);
}

CUresult instantiate(CUgraphExec* exec_out, CUgraph handle) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (exec_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUgraph_st* graph = registry().find<CUgraph_st>(handle);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto exec = std::make_unique<CUgraphExec_st>();
  {
    const std::lock_guard lock(graph->mutex);
    exec->duration_ns = graph->duration_ns;
    collect_memory_nodes(*graph, exec.get());
  }
  *exec_out = registry().adopt(std::move(exec));
  return CUDA_SUCCESS;
}

CUresult graph_launch(CUgraphExec handle, CUstream stream_handle, DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUgraphExec_st* exec = registry().find<CUgraphExec_st>(handle);
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(stream_handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  const bool has_memory = !exec->allocs.empty() || !exec->frees.empty();
  if (has_memory && stream->capture_graph != nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (drv::capture_if_capturing(stream, exec->duration_ns)) return CUDA_SUCCESS;
  if (has_memory) {
    if (const CUresult rc = drv::run_graph_memory(stream->ctx, exec, true); rc != CUDA_SUCCESS) {
      return rc;
    }
  }
  drv::SubmitRequest request;
  request.kind = egpu::simgpu::OpKind::kKernel;
  request.duration_ns = exec->duration_ns;
  request.is_launch = true;
  return drv::submit(stream, request, nullptr);
}

CUresult graph_upload(CUgraphExec handle, CUstream stream_handle, DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUgraphExec_st* exec = registry().find<CUgraphExec_st>(handle);
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(stream_handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  return drv::run_graph_memory(stream->ctx, exec, false);  // maps its memory
}

CUresult begin_capture(CUstream handle, DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  if (stream->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (stream->capture_graph != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  stream->capture_graph = registry().adopt(std::make_unique<CUgraph_st>());
  stream->capture_id = drv::Driver::get().next_id();
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream handle, CUgraph* graph_out, DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (graph_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  if (stream->capture_graph == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  *graph_out = stream->capture_graph;
  stream->capture_graph = nullptr;
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream handle, CUstreamCaptureStatus* status,
                      DefaultStream default_stream) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (const CUresult rc = drv::resolve_stream(handle, default_stream, &stream);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  *status = stream->capture_graph != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                             : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    *phGraph = registry().adopt(std::make_unique<CUgraph_st>());
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  return guarded([&] {
    CUgraph_st* graph = registry().find<CUgraph_st>(hGraph);
    if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
    destroy_graph(graph);
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                 const CUgraphNode* dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  (void)dependencies;
  (void)numDependencies;
  return guarded([&] {
    if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return add_node(phGraphNode, hGraph, CU_GRAPH_NODE_TYPE_KERNEL,
                    drv::kernel_duration_ns(nodeParams->kernelParams, nodeParams->extra));
  });
}

CUresult cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                              const CUgraphNode* dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  (void)dependencies;
  (void)numDependencies;
  return guarded([&] {
    if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return add_node(phGraphNode, hGraph, CU_GRAPH_NODE_TYPE_KERNEL,
                    drv::kernel_duration_ns(nodeParams->kernelParams, nodeParams->extra));
  });
}

CUresult cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                             const CUgraphNode* dependencies, size_t numDependencies) {
  (void)dependencies;
  (void)numDependencies;
  return guarded([&] { return add_node(phGraphNode, hGraph, CU_GRAPH_NODE_TYPE_EMPTY, 0); });
}

CUresult cuGraphAddChildGraphNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                  const CUgraphNode* dependencies, size_t numDependencies,
                                  CUgraph childGraph) {
  (void)dependencies;
  (void)numDependencies;
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUgraph_st* graph = registry().find<CUgraph_st>(hGraph);
    CUgraph_st* child = registry().find<CUgraph_st>(childGraph);
    if (graph == nullptr || child == nullptr || child == graph || phGraphNode == nullptr)
      return CUDA_ERROR_INVALID_VALUE;
    CUgraph_st* copy = nullptr;
    uint64_t duration_ns = 0;
    {
      const std::lock_guard lock(child->mutex);
      copy = copy_graph(*child);
      duration_ns = child->duration_ns;
    }
    const CUresult rc =
        drv::add_graph_node(phGraphNode, graph, CU_GRAPH_NODE_TYPE_GRAPH, duration_ns, {});
    if (rc == CUDA_SUCCESS) (*phGraphNode)->child = copy;
    return rc;
  });
}

CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph* phGraph) {
  return guarded([&] {
    const CUgraphNode_st* node = registry().find<CUgraphNode_st>(hNode);
    if (node == nullptr || phGraph == nullptr || node->child == nullptr)
      return CUDA_ERROR_INVALID_VALUE;
    *phGraph = node->child;
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  return guarded([&] {
    CUgraph_st* graph = registry().find<CUgraph_st>(hGraph);
    if (graph == nullptr || numNodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const std::lock_guard lock(graph->mutex);
    if (nodes != nullptr) {
      for (size_t i = 0; i < *numNodes; ++i)
        nodes[i] = i < graph->nodes.size() ? graph->nodes[i] : nullptr;
    }
    *numNodes = graph->nodes.size();
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  return guarded([&] {
    const CUgraphNode_st* node = registry().find<CUgraphNode_st>(hNode);
    if (node == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *type = node->type;
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                     unsigned long long flags) {
  (void)flags;
  return guarded([&] { return instantiate(phGraphExec, hGraph); });
}

CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize) {
  if (phErrorNode != nullptr) *phErrorNode = nullptr;
  if (logBuffer != nullptr && bufferSize > 0) logBuffer[0] = '\0';
  return guarded([&] { return instantiate(phGraphExec, hGraph); });
}

CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                               char* logBuffer, size_t bufferSize) {
  return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return guarded([&] {
    const CUresult rc = instantiate(phGraphExec, hGraph);
    if (instantiateParams != nullptr) {
      instantiateParams->result_out =
          rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
      instantiateParams->hErrNode_out = nullptr;
    }
    return rc;
  });
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  return guarded([&] {
    const CUgraphExec_st* exec = registry().find<CUgraphExec_st>(hGraphExec);
    if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    drv::forget_graph_exec(exec);
    registry().destroy(hGraphExec);
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return graph_launch(hGraphExec, hStream, DefaultStream::kLegacy); });
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return graph_launch(hGraphExec, hStream, DefaultStream::kPerThread); });
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return graph_upload(hGraphExec, hStream, DefaultStream::kLegacy); });
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return graph_upload(hGraphExec, hStream, DefaultStream::kPerThread); });
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  (void)mode;
  return guarded([&] { return begin_capture(hStream, DefaultStream::kLegacy); });
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  (void)mode;
  return guarded([&] { return begin_capture(hStream, DefaultStream::kPerThread); });
}

CUresult cuStreamBeginCapture(CUstream hStream) {
  return guarded([&] { return begin_capture(hStream, DefaultStream::kLegacy); });
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
  return guarded([&] { return begin_capture(hStream, DefaultStream::kPerThread); });
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  return guarded([&] { return end_capture(hStream, phGraph, DefaultStream::kLegacy); });
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  return guarded([&] { return end_capture(hStream, phGraph, DefaultStream::kPerThread); });
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  return guarded([&] { return is_capturing(hStream, captureStatus, DefaultStream::kLegacy); });
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  return guarded([&] { return is_capturing(hStream, captureStatus, DefaultStream::kPerThread); });
}

}  // extern "C"
