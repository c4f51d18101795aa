#include "shim/graph_memory.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "shim/pool_charge.h"
#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

// Child graphs nest; a cycle cannot, but a bound costs nothing.
constexpr int kMaxNesting = 8;

bool pool_figure(int ordinal, CUgraphMem_attribute attr, uint64_t* out) {
  const auto get_device = EGPU_REAL(cuDeviceGet);
  const auto get_attribute = EGPU_REAL(cuDeviceGetGraphMemAttribute);
  CUdevice dev = 0;
  cuuint64_t value = 0;
  if (get_device == nullptr || get_attribute == nullptr ||
      get_device(&dev, ordinal) != CUDA_SUCCESS ||
      get_attribute(dev, attr, &value) != CUDA_SUCCESS) {
    return false;
  }
  *out = value;
  return true;
}

bool graph_pool_reserved(uint64_t ordinal, uint64_t* bytes) {
  return pool_figure(static_cast<int>(ordinal), CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, bytes);
}

bool graph_pool_used(uint64_t ordinal, uint64_t* bytes) {
  return pool_figure(static_cast<int>(ordinal), CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, bytes);
}

constexpr PoolKind kGraphPool{AllocationKind::kGraphPool, &graph_pool_reserved, &graph_pool_used};

void settle_ordinal(ProcessState& s, int ordinal, const PoolTicket* ticket) {
  if (GpuBinding* b = s.binding(ordinal)) {
    settle_pool_charge(s, *b, kGraphPool, static_cast<uint64_t>(ordinal),
                       s.graph_execs().settle_mutex(), s.graph_execs().promises(), ticket);
  }
}

// Adds `graph`'s memory-alloc nodes (and its child graphs') to `found`:
// address -> (ordinal, bytes).
void collect(CUgraph graph, int depth, std::map<CUdeviceptr, std::pair<int, uint64_t>>* found) {
  const auto get_nodes = EGPU_REAL(cuGraphGetNodes);
  const auto get_type = EGPU_REAL(cuGraphNodeGetType);
  const auto get_params = EGPU_REAL(cuGraphMemAllocNodeGetParams);
  const auto get_child = EGPU_REAL(cuGraphChildGraphNodeGetGraph);
  if (get_nodes == nullptr || get_type == nullptr || get_params == nullptr || depth > kMaxNesting)
    return;
  size_t count = 0;
  if (get_nodes(graph, nullptr, &count) != CUDA_SUCCESS || count == 0) return;
  std::vector<CUgraphNode> nodes(count);
  if (get_nodes(graph, nodes.data(), &count) != CUDA_SUCCESS) return;
  nodes.resize(std::min(count, nodes.size()));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    if (node == nullptr || get_type(node, &type) != CUDA_SUCCESS) continue;
    if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child = nullptr;
      if (get_child != nullptr && get_child(node, &child) == CUDA_SUCCESS && child != nullptr)
        collect(child, depth + 1, found);
      continue;
    }
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    if (type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || get_params(node, &params) != CUDA_SUCCESS) continue;
    // The driver may give allocations whose lifetimes do not overlap the
    // same address: count each address once.
    auto& [ordinal, bytes] = (*found)[params.dptr];
    ordinal = params.poolProps.location.id;
    bytes = std::max<uint64_t>(bytes, params.bytesize);
  }
}

}  // namespace

bool graph_allocations(CUgraph graph, GraphAllocations* out_allocations) noexcept {
  GraphAllocations& out = *out_allocations;
  out.clear();
  try {
    std::map<CUdeviceptr, std::pair<int, uint64_t>> found;
    collect(graph, 0, &found);
    for (const auto& [address, allocation] : found) {
      const auto& [ordinal, bytes] = allocation;
      auto it = std::ranges::find(out, ordinal, &std::pair<int, uint64_t>::first);
      if (it == out.end()) {
        out.emplace_back(ordinal, bytes);
      } else {
        it->second += bytes;
      }
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error reading a graph's memory nodes: charged after its launches");
    return false;
  }
  return true;
}

bool admit_graph_memory(const GraphAllocations& allocations, bool mapped,
                        PoolTicket* ticket) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return true;
  FreePartPromises& promises = s->graph_execs().promises();
  try {
    for (const auto& [ordinal, bytes] : allocations) {
      GpuBinding* b = s->binding(ordinal);
      if (b == nullptr) continue;
      if (mapped) {
        // Its memory is mapped already, unless the driver lent it to another
        // graph and maps it anew: an instance over its quota gets no more.
        if (over_quota(*b)) {
          cancel_pool_ticket(promises, ticket);
          return false;
        }
        ticket->pools.emplace_back(static_cast<uint64_t>(ordinal), ordinal);
        continue;
      }
      settle_ordinal(*s, ordinal, nullptr);  // the pool as it is now, whoever grew it
      if (!admit_to_pool(*s, *b, kGraphPool, static_cast<uint64_t>(ordinal), promises, bytes,
                         ticket)) {
        cancel_pool_ticket(promises, ticket);
        return false;
      }
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error checking a graph's memory: charged after its launch");
  }
  return true;
}

void settle_graph_memory(const PoolTicket& ticket) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  try {
    for (const auto& [key, ordinal] : ticket.pools)
      settle_ordinal(*s, ordinal, &ticket);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling a graph's memory: accounting may be off");
  }
  end_admissions(s->graph_execs().promises(), ticket);
}

void settle_graph_pool(int ordinal) noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  try {
    settle_ordinal(*s, ordinal, nullptr);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling a graph pool: accounting may be off");
  }
}

void settle_graph_pools() noexcept {
  ProcessState* s = process_state();
  if (s == nullptr || !s->usable()) return;
  try {
    for (const uint64_t key : s->allocations().keys(AllocationKind::kGraphPool))
      settle_ordinal(*s, static_cast<int>(key), nullptr);
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error settling graph pools: accounting may be off");
  }
}

}  // namespace egpu::shim
