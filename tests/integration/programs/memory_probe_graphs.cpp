// memory-probe graph-pool SIZE BIG: graph memory. A captured stream-ordered
// allocation of SIZE (freed in the graph) is launched twice, a plain
// allocation of SIZE is tried beside it, the graph is destroyed and a second
// one like it launched from the pool the first left; the pool is trimmed and
// the plain allocation tried again; then a graph allocating BIG, and one
// holding such a graph as a child, are launched; a last graph's pool goes
// with its context's reset. Memory info between.
#include "memory_probe.h"

namespace memory_probe {
namespace {

uint64_t reserved(CUdevice dev) {
  cuuint64_t value = 0;
  check(cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value),
        "cuDeviceGetGraphMemAttribute");
  return value;
}

// A plain allocation of `size`, freed at once: its result.
std::string try_alloc(size_t size) {
  CUdeviceptr p = 0;
  const CUresult r = cuMemAlloc(&p, size);
  if (r == CUDA_SUCCESS) check(cuMemFree(p), "cuMemFree");
  return name_of(r);
}

CUgraphExec captured_graph(CUstream stream, size_t size) {
  check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  CUdeviceptr p = 0;
  check(cuMemAllocAsync(&p, size, stream), "cuMemAllocAsync (captured)");
  check(cuMemFreeAsync(p, stream), "cuMemFreeAsync (captured)");
  CUgraph graph = nullptr;
  check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  check(cuGraphDestroy(graph), "cuGraphDestroy");
  return exec;
}

CUgraph allocating_graph(CUdevice dev, size_t size) {
  CUgraph graph = nullptr;
  check(cuGraphCreate(&graph, 0), "cuGraphCreate");
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = dev;
  params.bytesize = size;
  CUgraphNode alloc = nullptr;
  check(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params), "cuGraphAddMemAllocNode");
  CUgraphNode freed = nullptr;
  check(cuGraphAddMemFreeNode(&freed, graph, &alloc, 1, params.dptr), "cuGraphAddMemFreeNode");
  return graph;
}

CUgraphExec instantiated(CUgraph graph) {
  CUgraphExec exec = nullptr;
  check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  check(cuGraphDestroy(graph), "cuGraphDestroy");
  return exec;
}

}  // namespace

json graph_pool(CUdevice dev, CUstream stream, size_t size, size_t big) {
  json out;
  CUgraphExec exec = captured_graph(stream, size);
  out["captured"] = info();
  out["launch"] = name_of(cuGraphLaunch(exec, stream));
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["launched"] = info();
  out["reserved"] = reserved(dev);
  out["relaunch"] = name_of(cuGraphLaunch(exec, stream));  // its memory is mapped already
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["alloc_beside_pool"] = try_alloc(size);
  check(cuGraphExecDestroy(exec), "cuGraphExecDestroy");
  out["destroyed"] = info();  // the pool keeps what the graph had
  exec = captured_graph(stream, size);
  out["second_launch"] = name_of(cuGraphLaunch(exec, stream));  // from the pool's free part
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["second_reserved"] = reserved(dev);
  check(cuGraphExecDestroy(exec), "cuGraphExecDestroy");
  out["trim"] = name_of(cuDeviceGraphMemTrim(dev));
  out["trimmed"] = info();
  out["alloc_after_trim"] = try_alloc(size);

  CUgraphExec large = instantiated(allocating_graph(dev, big));
  out["big_launch"] = name_of(cuGraphLaunch(large, stream));
  out["big_upload"] = name_of(cuGraphUpload(large, stream));
  check(cuGraphExecDestroy(large), "cuGraphExecDestroy");
  // The same inside a child graph (CUDA may refuse to nest memory nodes:
  // then "child" says so and nothing is launched).
  CUgraph child = allocating_graph(dev, big);
  CUgraph parent = nullptr;
  check(cuGraphCreate(&parent, 0), "cuGraphCreate");
  CUgraphNode node = nullptr;
  out["child"] = name_of(cuGraphAddChildGraphNode(&node, parent, nullptr, 0, child));
  check(cuGraphDestroy(child), "cuGraphDestroy");
  if (out["child"] == "CUDA_SUCCESS") {
    CUgraphExec nested = instantiated(parent);
    out["child_launch"] = name_of(cuGraphLaunch(nested, stream));
    check(cuGraphExecDestroy(nested), "cuGraphExecDestroy");
  } else {
    check(cuGraphDestroy(parent), "cuGraphDestroy");
  }
  out["big"] = info();
  out["big_reserved"] = reserved(dev);

  // A primary context's reset takes the graph pool with it.
  exec = captured_graph(stream, size);
  out["last_launch"] = name_of(cuGraphLaunch(exec, stream));
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["before_reset"] = info();
  out["after_reset"] = info_after_primary_reset(dev);
  return out;
}

}  // namespace memory_probe
