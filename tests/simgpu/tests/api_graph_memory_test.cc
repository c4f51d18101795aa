// Graph memory through the exported API: memory nodes, explicit or captured
// from stream-ordered allocations, are mapped to their graph from the
// process's graph pool at its first launch or upload; the graph keeps them
// until destroyed, the pool until trimmed.
#include "api_fixture.h"

namespace egpu::simgpu::testing {
namespace {

constexpr size_t kTotal = kApiMemoryMb * kMiB;

uint64_t graph_memory(CUgraphMem_attribute attr) {
  cuuint64_t value = ~cuuint64_t{0};
  EXPECT_EQ(cuDeviceGetGraphMemAttribute(0, attr, &value), CUDA_SUCCESS);
  return value;
}

// A graph that allocates `bytes` on device 0 and (if `free`) frees it.
CUgraphExec allocating_graph(size_t bytes, bool free, CUdeviceptr* address) {
  CUgraph graph = nullptr;
  EXPECT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = 0;
  params.bytesize = bytes;
  CUgraphNode alloc = nullptr;
  EXPECT_EQ(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params), CUDA_SUCCESS);
  *address = params.dptr;
  if (free) {
    CUgraphNode freed = nullptr;
    EXPECT_EQ(cuGraphAddMemFreeNode(&freed, graph, &alloc, 1, params.dptr), CUDA_SUCCESS);
  }
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  return exec;
}

TEST_F(ApiTest, GraphMemoryIsMappedAtTheFirstLaunchAndKeptUntilTrimmed) {
  CUdeviceptr address = 0;
  CUgraphExec exec = allocating_graph(300 * kMiB, /*free=*/true, &address);
  EXPECT_NE(address, 0u);
  EXPECT_EQ(free_memory(), kTotal);  // nothing is backed before a launch
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 300 * kMiB);  // freed in the graph, still mapped to it
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 300 * kMiB);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 300 * kMiB);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);  // its mappings again
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 300 * kMiB);
  EXPECT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);  // mapped: kept
  EXPECT_EQ(free_memory(), kTotal - 300 * kMiB);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(free_memory(), kTotal - 300 * kMiB);  // the pool keeps it
  // Another graph maps what the pool has free: nothing grows.
  CUgraphExec second = allocating_graph(200 * kMiB, /*free=*/true, &address);
  ASSERT_EQ(cuGraphLaunch(second, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 300 * kMiB);
  EXPECT_EQ(cuGraphExecDestroy(second), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 300 * kMiB);
  cuuint64_t zero = 0;
  EXPECT_EQ(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero),
            CUDA_SUCCESS);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 0u);
}

TEST_F(ApiTest, AnUnfreedGraphAllocationLivesUntilFreedAndBlocksRelaunch) {
  CUdeviceptr address = 0;
  CUgraphExec exec = allocating_graph(100 * kMiB, /*free=*/false, &address);
  ASSERT_EQ(cuGraphUpload(exec, nullptr), CUDA_SUCCESS);  // maps it
  EXPECT_EQ(free_memory(), kTotal - 100 * kMiB);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 100 * kMiB);
  EXPECT_EQ(cuGraphLaunch(exec, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFreeAsync(address, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(address), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);  // live: stays in use
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 100 * kMiB);
  EXPECT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 100 * kMiB);
  EXPECT_EQ(cuMemFree(address), CUDA_SUCCESS);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
}

TEST_F(ApiTest, AChildGraphsMemoryNodesAreTheGraphs) {
  CUgraph child = nullptr;
  ASSERT_EQ(cuGraphCreate(&child, 0), CUDA_SUCCESS);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.bytesize = 64 * kMiB;
  CUgraphNode alloc = nullptr, freed = nullptr, node = nullptr;
  ASSERT_EQ(cuGraphAddMemAllocNode(&alloc, child, nullptr, 0, &params), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphAddMemFreeNode(&freed, child, &alloc, 1, params.dptr), CUDA_SUCCESS);
  CUgraph parent = nullptr;
  ASSERT_EQ(cuGraphCreate(&parent, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphAddChildGraphNode(&node, parent, nullptr, 0, child), CUDA_SUCCESS);
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  ASSERT_EQ(cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_GRAPH);
  CUgraph copy = nullptr;
  ASSERT_EQ(cuGraphChildGraphNodeGetGraph(node, &copy), CUDA_SUCCESS);
  size_t count = 0;
  ASSERT_EQ(cuGraphGetNodes(copy, nullptr, &count), CUDA_SUCCESS);
  EXPECT_EQ(count, 2u);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiate(&exec, parent, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(parent), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(child), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
}

TEST_F(ApiTest, AGraphLaunchThatDoesNotFitFailsAndChangesNothing) {
  CUdeviceptr address = 0;
  CUgraphExec exec = allocating_graph(kTotal + 1, /*free=*/true, &address);
  EXPECT_EQ(cuGraphLaunch(exec, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(free_memory(), kTotal);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
}

TEST_F(ApiTest, CapturedStreamOrderedAllocationsBecomeMemoryNodes) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr outside = 0;
  ASSERT_EQ(cuMemAllocAsync(&outside, kMiB, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAllocAsync(&p, 200 * kMiB, stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - kMiB);  // captured: nothing allocated yet
  ASSERT_EQ(launch(1000, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(outside, stream), CUDA_ERROR_INVALID_VALUE);  // not graph memory
  ASSERT_EQ(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  size_t count = 0;
  ASSERT_EQ(cuGraphGetNodes(graph, nullptr, &count), CUDA_SUCCESS);
  ASSERT_EQ(count, 2u);  // captured work is the graph's duration, not nodes
  CUgraphNode nodes[2] = {};
  ASSERT_EQ(cuGraphGetNodes(graph, nodes, &count), CUDA_SUCCESS);
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  ASSERT_EQ(cuGraphNodeGetType(nodes[0], &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  ASSERT_EQ(cuGraphMemAllocNodeGetParams(nodes[0], &params), CUDA_SUCCESS);
  EXPECT_EQ(params.bytesize, 200 * kMiB);
  EXPECT_EQ(params.dptr, p);
  ASSERT_EQ(cuGraphNodeGetType(nodes[1], &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEM_FREE);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - kMiB - 200 * kMiB);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(outside, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  cuStreamDestroy(stream);
}

TEST_F(ApiTest, DestroyingTheLaunchingContextTakesThePoolWithIt) {
  CUcontext other = nullptr;
  ASSERT_EQ(cuCtxCreate(&other, nullptr, 0, 0), CUDA_SUCCESS);  // current now
  CUdeviceptr address = 0;
  CUgraphExec exec = allocating_graph(50 * kMiB, /*free=*/false, &address);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 50 * kMiB);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(other), CUDA_SUCCESS);  // pops it: ctx_ is current again
  EXPECT_EQ(free_memory(), kTotal);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
}

}  // namespace
}  // namespace egpu::simgpu::testing
