// Graph entry points: launches (paced like kernels) and what backs graph
// memory (graph_memory.h): instantiation notes what a graph allocates, a
// launch or an upload is checked against the quota and then settled, a trim
// gives the pool's memory back.
#include "shim/graph_memory.h"
#include "shim/launch_path.h"

using egpu::shim::DefaultStream;
using egpu::shim::RealId;

namespace egpu::shim {
namespace {

// `call` maps `allocations` unless `mapped` (a launch or an upload of
// `exec`; null: an instantiation that uploads). Returns its result.
template <typename Call>
CUresult backing_graph_memory(const void* exec, const GraphAllocations& allocations, bool mapped,
                              Call&& call) noexcept {
  PoolTicket ticket;
  if (!admit_graph_memory(allocations, mapped, &ticket)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = call();
  settle_graph_memory(ticket);
  ProcessState* s = process_state();
  if (rc == CUDA_SUCCESS && exec != nullptr && s != nullptr) {
    try {
      s->graph_execs().set_mapped(exec);
    } catch (...) {
      EGPU_SHIM_LOG_ONCE("internal error noting a graph's memory as mapped");
    }
  }
  return rc;
}

// A launch or an upload of `exec`: what it allocates is checked and settled.
template <typename Call>
CUresult with_graph_memory(CUgraphExec exec, Call&& call) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable() || s->graph_execs().empty()) return call();
  std::optional<GraphExecTable::Entry> entry;
  try {
    entry = s->graph_execs().find(exec);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error looking up a graph's memory: passing it through");
  }
  if (!entry) return call();
  return backing_graph_memory(exec, entry->allocations, entry->mapped, call);
}

template <typename Launch>
CUresult graph_launch(RealId id, CUgraphExec exec, CUstream stream, DefaultStream zero_means,
                      Launch&& launch) noexcept {
  const auto paced = [&] { return paced_launch(id, stream, zero_means, launch); };
  // Into a capturing stream it is a node of that graph; nothing is mapped.
  if (capture_state().capturing(capture_key(stream, zero_means == DefaultStream::kPerThread)))
    return paced();
  return with_graph_memory(exec, paced);
}

template <typename Upload>
CUresult graph_upload(RealId id, CUgraphExec exec, Upload&& upload) noexcept {
  note_call(id);
  return with_graph_memory(exec, upload);
}

// `uploads`: the instantiation uploads the graph too, mapping its memory.
template <typename Instantiate>
CUresult instantiate(RealId id, CUgraphExec* exec_out, CUgraph graph, bool uploads,
                     Instantiate&& call) noexcept {
  note_call(id);
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return call();
  GraphAllocations allocations;
  if (!graph_allocations(graph, &allocations)) {
    // Unknown: its launches settle the current device's pool, unchecked.
    try {
      const GpuBinding* b = s->current_binding();
      allocations = {{b != nullptr ? b->ordinal() : 0, 0}};
    } catch (...) {
      return call();
    }
  }
  if (allocations.empty()) return call();
  const CUresult rc = uploads ? backing_graph_memory(nullptr, allocations, false, call) : call();
  if (rc != CUDA_SUCCESS || exec_out == nullptr) return rc;
  try {
    s->graph_execs().note(*exec_out, std::move(allocations));
    if (uploads) s->graph_execs().set_mapped(*exec_out);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error noting a graph's memory: charged after its launches");
  }
  return rc;
}

bool uploads(unsigned long long flags) {
  return (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0;
}

}  // namespace
}  // namespace egpu::shim

using egpu::shim::graph_launch;
using egpu::shim::graph_upload;
using egpu::shim::instantiate;
using egpu::shim::uploads;

extern "C" {

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuGraphLaunch);
  return graph_launch(RealId::cuGraphLaunch, hGraphExec, hStream, DefaultStream::kLegacy,
                      [&] { return real(hGraphExec, hStream); });
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuGraphLaunch_ptsz);
  return graph_launch(RealId::cuGraphLaunch_ptsz, hGraphExec, hStream, DefaultStream::kPerThread,
                      [&] { return real(hGraphExec, hStream); });
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuGraphUpload);
  return graph_upload(RealId::cuGraphUpload, hGraphExec, [&] { return real(hGraphExec, hStream); });
}

CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  EGPU_REAL_OR_RETURN(cuGraphUpload_ptsz);
  return graph_upload(RealId::cuGraphUpload_ptsz, hGraphExec,
                      [&] { return real(hGraphExec, hStream); });
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph,
                                    CUgraphNode* phErrorNode, char* logBuffer, size_t bufferSize) {
  EGPU_REAL_OR_RETURN(cuGraphInstantiate);
  return instantiate(RealId::cuGraphInstantiate, phGraphExec, hGraph, false,
                     [&] { return real(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                       CUgraphNode* phErrorNode, char* logBuffer,
                                       size_t bufferSize) {
  EGPU_REAL_OR_RETURN(cuGraphInstantiate_v2);
  return instantiate(RealId::cuGraphInstantiate_v2, phGraphExec, hGraph, false,
                     [&] { return real(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  EGPU_REAL_OR_RETURN(cuGraphInstantiateWithFlags);
  return instantiate(RealId::cuGraphInstantiateWithFlags, phGraphExec, hGraph, uploads(flags),
                     [&] { return real(phGraphExec, hGraph, flags); });
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  EGPU_REAL_OR_RETURN(cuGraphInstantiateWithParams);
  return instantiate(RealId::cuGraphInstantiateWithParams, phGraphExec, hGraph,
                     instantiateParams != nullptr && uploads(instantiateParams->flags),
                     [&] { return real(phGraphExec, hGraph, instantiateParams); });
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(
    CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  EGPU_REAL_OR_RETURN(cuGraphInstantiateWithParams_ptsz);
  return instantiate(RealId::cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph,
                     instantiateParams != nullptr && uploads(instantiateParams->flags),
                     [&] { return real(phGraphExec, hGraph, instantiateParams); });
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  EGPU_REAL_OR_RETURN(cuGraphExecDestroy);
  egpu::shim::note_call(RealId::cuGraphExecDestroy);
  const CUresult rc = real(hGraphExec);
  egpu::shim::ProcessState* s = egpu::shim::process_state();
  if (rc == CUDA_SUCCESS && s != nullptr && !s->graph_execs().empty()) {
    try {
      s->graph_execs().forget(hGraphExec);
    } catch (...) {
      EGPU_SHIM_LOG_ONCE("internal error forgetting a graph's memory");
    }
  }
  return rc;
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device) {
  EGPU_REAL_OR_RETURN(cuDeviceGraphMemTrim);
  egpu::shim::note_call(RealId::cuDeviceGraphMemTrim);
  const CUresult rc = real(device);
  egpu::shim::settle_graph_pool(device);
  return rc;
}

}  // extern "C"
