// The driver's handle objects (the structs behind cuda.h's opaque handle
// types) and the registry that owns them and validates handles passed in.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace egpu::simgpu::driver {

enum class HandleKind {
  kContext,
  kStream,
  kEvent,
  kModule,
  kFunction,
  kLibrary,
  kKernel,
  kGraph,
  kGraphNode,
  kGraphExec,
  kArray,
  kMipmappedArray,
  kMemPool,
};

// A graph allocation (driver/graph_memory.h): its fixed address and size.
struct GraphAllocation {
  uint64_t address = 0;
  uint64_t bytes = 0;
  int ordinal = 0;
};

struct HandleBase {
  explicit HandleBase(HandleKind k) : kind(k) {}
  virtual ~HandleBase() = default;
  HandleBase(const HandleBase&) = delete;
  HandleBase& operator=(const HandleBase&) = delete;
  const HandleKind kind;
  CUctx_st* owner_ctx = nullptr;  // destroyed with this context (nullptr: process-wide)
};

}  // namespace egpu::simgpu::driver

using egpu::simgpu::driver::HandleBase;
using egpu::simgpu::driver::HandleKind;

struct CUctx_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kContext;
  CUctx_st() : HandleBase(kKind) {}
  ~CUctx_st() override;
  uint64_t id = 0;  // unique in the process, never reused
  int ordinal = 0;  // as the process sees it (CUDA_VISIBLE_DEVICES)
  uint32_t physical = 0;
  uint32_t slot = 0;  // in the device's shared context table
  uint32_t generation = 0;
  bool primary = false;
  unsigned int flags = 0;
  std::atomic<uint64_t> last_seq{0};  // highest op sequence submitted
  std::unique_ptr<CUstream_st> legacy_stream;
  std::mutex mutex;  // guards the fields below
  std::vector<uint32_t> free_event_slots;
  uint32_t next_event_slot = 0;
  std::map<int, size_t> limits;
  std::map<int, uint64_t> limit_allocations;  // limit -> device memory backing it
  CUfunc_cache cache_config = CU_FUNC_CACHE_PREFER_NONE;
};

struct CUstream_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kStream;
  CUstream_st() : HandleBase(kKind) {}
  CUctx_st* ctx = nullptr;
  uint32_t tag = 0;
  unsigned int flags = 0;
  int priority = 0;
  uint64_t id = 0;
  bool legacy = false;      // the context's NULL stream
  bool per_thread = false;  // a thread's default stream
  std::atomic<uint64_t> last_seq{0};
  CUgraph_st* capture_graph = nullptr;  // non-null while capturing
  uint64_t capture_id = 0;
};

struct CUevent_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kEvent;
  CUevent_st() : HandleBase(kKind) {}
  CUctx_st* ctx = nullptr;
  unsigned int flags = 0;
  uint32_t stamp_slot = 0;
  std::atomic<uint64_t> recorded_seq{0};  // 0: never recorded
};

struct CUfunc_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kFunction;
  CUfunc_st() : HandleBase(kKind) {}
  CUmod_st* module = nullptr;
  std::string name;
  bool collective = false;  // launched as a collective (collective_launch.h), from its name
  // cuParamSet*'s buffer for the pre-CUDA-4 launches (api_launch_legacy.cc).
  std::mutex legacy_mutex;
  std::vector<char> legacy_params;
};

struct CUmod_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kModule;
  CUmod_st() : HandleBase(kKind) {}
  std::mutex mutex;
  std::map<std::string, CUfunc_st*> functions;  // registry-owned
};

struct CUkern_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kKernel;
  CUkern_st() : HandleBase(kKind) {}
  CUlib_st* library = nullptr;
  std::string name;
  bool collective = false;        // as CUfunc_st's
  CUfunc_st* function = nullptr;  // cuKernelGetFunction's answer, registry-owned
};

struct CUlib_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kLibrary;
  CUlib_st() : HandleBase(kKind) {}
  std::mutex mutex;
  std::map<std::string, CUkern_st*> kernels;  // registry-owned
};

struct CUgraphNode_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kGraphNode;
  CUgraphNode_st() : HandleBase(kKind) {}
  CUgraph_st* graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_KERNEL;
  uint64_t duration_ns = 0;
  egpu::simgpu::driver::GraphAllocation memory;  // memory nodes: what is allocated or freed
  CUgraph_st* child = nullptr;  // a child-graph node: its own copy of the graph (registry-owned)
};

// A graph runs as one op whose duration is the sum of its kernel nodes (the
// first kernel parameter of each, as for launches) or of what a stream
// capture recorded.
struct CUgraph_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kGraph;
  CUgraph_st() : HandleBase(kKind) {}
  std::mutex mutex;
  uint64_t duration_ns = 0;
  std::vector<CUgraphNode_st*> nodes;  // registry-owned
};

struct CUgraphExec_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kGraphExec;
  CUgraphExec_st() : HandleBase(kKind) {}
  uint64_t duration_ns = 0;
  // The graph's memory nodes: what it allocates, the addresses it frees.
  std::vector<egpu::simgpu::driver::GraphAllocation> allocs;
  std::vector<uint64_t> frees;
  uint64_t mapped_epoch = 0;  // graph_memory.cc's epoch when its memory was mapped (0: never)
};

struct CUarray_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kArray;
  CUarray_st() : HandleBase(kKind) {}
  uint32_t physical = 0;
  uint64_t address = 0;  // accounting key in the device's memory table
  uint64_t bytes = 0;
  CUDA_ARRAY3D_DESCRIPTOR descriptor{};
};

struct CUmipmappedArray_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kMipmappedArray;
  CUmipmappedArray_st() : HandleBase(kKind) {}
  uint32_t physical = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
};

struct CUmemPoolHandle_st : HandleBase {
  static constexpr HandleKind kKind = HandleKind::kMemPool;
  CUmemPoolHandle_st() : HandleBase(kKind) {}
  uint32_t physical = 0;
  int ordinal = 0;
  bool is_default = false;
  bool imported = false;          // cuMemPoolImportFromShareableHandle: no allocations of its own
  unsigned int handle_types = 0;  // CUmemPoolProps::handleTypes: how it may be exported
  uint64_t release_threshold = 0;
  bool reuse_opportunistic = true;  // CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC
};

namespace egpu::simgpu::driver {

// Owns every handle object; a handle is valid while it is registered.
class HandleRegistry {
 public:
  template <class T>
  T* adopt(std::unique_ptr<T> object) {
    T* raw = object.get();
    std::lock_guard lock(mutex_);
    objects_.emplace(static_cast<const void*>(raw), std::move(object));
    return raw;
  }

  // The object behind `handle` if it is a live handle of type T, else nullptr.
  template <class T>
  T* find(const void* handle) const {
    if (handle == nullptr) return nullptr;
    std::lock_guard lock(mutex_);
    const auto it = objects_.find(handle);
    if (it == objects_.end() || it->second->kind != T::kKind) return nullptr;
    return static_cast<T*>(it->second.get());
  }

  bool contains(const void* handle, HandleKind kind) const;

  // Destroys one handle object; false if it was not registered.
  bool destroy(const void* handle);

  // Destroys every object owned by `ctx` (its streams, events, ...).
  void destroy_owned_by(const CUctx_st* ctx);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const void*, std::unique_ptr<HandleBase>> objects_;
};

HandleRegistry& registry();

}  // namespace egpu::simgpu::driver
