#include "shim/wrapped_symbols.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>

#include "shim/after_fork.h"
#include "shim/built_once.h"
#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

struct Wrapped {
  const char* name;
  void* wrapper;
  RealId id;
};

#define EGPU_AS_ENTRY(name) Wrapped{#name, reinterpret_cast<void*>(&::name), RealId::name},
const std::array<Wrapped, kWrappedCount> kWrapped = {EGPU_WRAPPED_FUNCTIONS(EGPU_AS_ENTRY)};
#undef EGPU_AS_ENTRY

using NameTable = std::array<const Wrapped*, kWrappedCount>;
constinit BuiltOnce<NameTable> g_by_name;

// Sorted by name once, at first use (null while another thread sorts).
const NameTable* by_name() {
  return g_by_name.get([](NameTable& out) {
    for (size_t i = 0; i < kWrapped.size(); ++i)
      out[i] = &kWrapped[i];
    std::sort(out.begin(), out.end(),
              [](const Wrapped* a, const Wrapped* b) { return std::strcmp(a->name, b->name) < 0; });
  });
}

// Real function -> wrapper, built the first time cuGetProcAddress needs it.
struct RealToWrapper {
  std::array<std::pair<void*, void*>, kWrappedCount> entries{};
  size_t size = 0;
};
constinit BuiltOnce<RealToWrapper> g_by_real;

// Null while another thread builds it.
const RealToWrapper* by_real() {
  return g_by_real.get([](RealToWrapper& t) {
    for (const Wrapped& w : kWrapped) {
      if (void* real = real_function(w.id)) t.entries[t.size++] = {real, w.wrapper};
    }
    std::sort(t.entries.begin(), t.entries.begin() + static_cast<long>(t.size));
  });
}

// ABI variants of each wrapped API, from cudaTypedefs.h's PFN_<name>_v<version>.
struct Variant {
  const char* api;
  const char* abi;
  int since;
  bool per_thread;
};
constexpr Variant kVariants[] = {
    {"cuInit", "cuInit", 2000, false},
    {"cuGetProcAddress", "cuGetProcAddress", 11030, false},
    {"cuGetProcAddress", "cuGetProcAddress_v2", 12000, false},
    {"cuLaunchKernel", "cuLaunchKernel", 4000, false},
    {"cuLaunchKernel", "cuLaunchKernel_ptsz", 7000, true},
    {"cuLaunchKernelEx", "cuLaunchKernelEx", 11060, false},
    {"cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", 11060, true},
    {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 9000, false},
    {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", 9000, true},
    {"cuLaunchCooperativeKernelMultiDevice", "cuLaunchCooperativeKernelMultiDevice", 9000, false},
    {"cuLaunch", "cuLaunch", 2000, false},
    {"cuLaunchGrid", "cuLaunchGrid", 2000, false},
    {"cuLaunchGridAsync", "cuLaunchGridAsync", 2000, false},
    {"cuGraphLaunch", "cuGraphLaunch", 10000, false},
    {"cuGraphLaunch", "cuGraphLaunch_ptsz", 10000, true},
    {"cuGraphUpload", "cuGraphUpload", 11010, false},
    {"cuGraphUpload", "cuGraphUpload_ptsz", 11010, true},
    {"cuGraphInstantiate", "cuGraphInstantiate", 10000, false},
    {"cuGraphInstantiate", "cuGraphInstantiate_v2", 11000, false},
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000, false},
    {"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 11040, false},
    {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams", 12000, false},
    {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz", 12000, true},
    {"cuGraphExecDestroy", "cuGraphExecDestroy", 10000, false},
    {"cuDeviceGraphMemTrim", "cuDeviceGraphMemTrim", 11040, false},
    {"cuMemPoolCreate", "cuMemPoolCreate", 11020, false},
    {"cuMemPoolTrimTo", "cuMemPoolTrimTo", 11020, false},
    {"cuMemPoolDestroy", "cuMemPoolDestroy", 11020, false},
    {"cuStreamBeginCapture", "cuStreamBeginCapture", 10000, false},
    {"cuStreamBeginCapture", "cuStreamBeginCapture_ptsz", 10000, true},
    {"cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010, false},
    {"cuStreamBeginCapture", "cuStreamBeginCapture_v2_ptsz", 10010, true},
    {"cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph", 12030, false},
    {"cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph_ptsz", 12030, true},
    {"cuStreamEndCapture", "cuStreamEndCapture", 10000, false},
    {"cuStreamEndCapture", "cuStreamEndCapture_ptsz", 10000, true},
    {"cuCtxSynchronize", "cuCtxSynchronize", 2000, false},
    {"cuCtxSynchronize", "cuCtxSynchronize_v2", 13000, false},
    {"cuStreamSynchronize", "cuStreamSynchronize", 2000, false},
    {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", 7000, true},
    {"cuEventSynchronize", "cuEventSynchronize", 2000, false},
    {"cuMemcpyHtoD", "cuMemcpyHtoD", 2000, false},
    {"cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020, false},
    {"cuMemcpyHtoD", "cuMemcpyHtoD_v2_ptds", 7000, true},
    {"cuMemcpyDtoH", "cuMemcpyDtoH", 2000, false},
    {"cuMemcpyDtoH", "cuMemcpyDtoH_v2", 3020, false},
    {"cuMemcpyDtoH", "cuMemcpyDtoH_v2_ptds", 7000, true},
    {"cuMemcpyDtoD", "cuMemcpyDtoD", 2000, false},
    {"cuMemcpyDtoD", "cuMemcpyDtoD_v2", 3020, false},
    {"cuMemcpyDtoD", "cuMemcpyDtoD_v2_ptds", 7000, true},
    {"cuMemcpy", "cuMemcpy", 4000, false},
    {"cuMemcpy", "cuMemcpy_ptds", 7000, true},
    {"cuMemsetD8", "cuMemsetD8", 2000, false},
    {"cuMemsetD8", "cuMemsetD8_v2", 3020, false},
    {"cuMemsetD8", "cuMemsetD8_v2_ptds", 7000, true},
    {"cuMemsetD8Async", "cuMemsetD8Async", 3020, false},
    {"cuMemsetD8Async", "cuMemsetD8Async_ptsz", 7000, true},
    {"cuMemsetD16", "cuMemsetD16", 2000, false},
    {"cuMemsetD16", "cuMemsetD16_v2", 3020, false},
    {"cuMemsetD16", "cuMemsetD16_v2_ptds", 7000, true},
    {"cuMemsetD16Async", "cuMemsetD16Async", 3020, false},
    {"cuMemsetD16Async", "cuMemsetD16Async_ptsz", 7000, true},
    {"cuMemsetD32", "cuMemsetD32", 2000, false},
    {"cuMemsetD32", "cuMemsetD32_v2", 3020, false},
    {"cuMemsetD32", "cuMemsetD32_v2_ptds", 7000, true},
    {"cuMemsetD32Async", "cuMemsetD32Async", 3020, false},
    {"cuMemsetD32Async", "cuMemsetD32Async_ptsz", 7000, true},
    {"cuMemsetD2D8", "cuMemsetD2D8", 2000, false},
    {"cuMemsetD2D8", "cuMemsetD2D8_v2", 3020, false},
    {"cuMemsetD2D8", "cuMemsetD2D8_v2_ptds", 7000, true},
    {"cuMemsetD2D8Async", "cuMemsetD2D8Async", 3020, false},
    {"cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz", 7000, true},
    {"cuMemsetD2D16", "cuMemsetD2D16", 2000, false},
    {"cuMemsetD2D16", "cuMemsetD2D16_v2", 3020, false},
    {"cuMemsetD2D16", "cuMemsetD2D16_v2_ptds", 7000, true},
    {"cuMemsetD2D16Async", "cuMemsetD2D16Async", 3020, false},
    {"cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz", 7000, true},
    {"cuMemsetD2D32", "cuMemsetD2D32", 2000, false},
    {"cuMemsetD2D32", "cuMemsetD2D32_v2", 3020, false},
    {"cuMemsetD2D32", "cuMemsetD2D32_v2_ptds", 7000, true},
    {"cuMemsetD2D32Async", "cuMemsetD2D32Async", 3020, false},
    {"cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz", 7000, true},
    {"cuStreamDestroy", "cuStreamDestroy", 2000, false},
    {"cuStreamDestroy", "cuStreamDestroy_v2", 4000, false},
    {"cuCtxDestroy", "cuCtxDestroy", 2000, false},
    {"cuCtxDestroy", "cuCtxDestroy_v2", 4000, false},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 7000, false},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000, false},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000, false},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, false},
    {"cuMemAlloc", "cuMemAlloc", 2000, false},
    {"cuMemAlloc", "cuMemAlloc_v2", 3020, false},
    {"cuMemAllocPitch", "cuMemAllocPitch", 2000, false},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020, false},
    {"cuMemAllocManaged", "cuMemAllocManaged", 6000, false},
    {"cuMemAllocAsync", "cuMemAllocAsync", 11020, false},
    {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", 11020, true},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, false},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 11020, true},
    {"cuMemCreate", "cuMemCreate", 10020, false},
    {"cuMemRelease", "cuMemRelease", 10020, false},
    {"cuMemMap", "cuMemMap", 10020, false},
    {"cuMemUnmap", "cuMemUnmap", 10020, false},
    {"cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", 11000, false},
    {"cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", 10020, false},
    {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle", 4010, false},
    {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 11000, false},
    {"cuIpcCloseMemHandle", "cuIpcCloseMemHandle", 4010, false},
    {"cuMemPoolImportPointer", "cuMemPoolImportPointer", 11020, false},
    {"cuCtxSetLimit", "cuCtxSetLimit", 3010, false},
    {"cuArrayCreate", "cuArrayCreate", 2000, false},
    {"cuArrayCreate", "cuArrayCreate_v2", 3020, false},
    {"cuArray3DCreate", "cuArray3DCreate", 2000, false},
    {"cuArray3DCreate", "cuArray3DCreate_v2", 3020, false},
    {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 5000, false},
    {"cuArrayDestroy", "cuArrayDestroy", 2000, false},
    {"cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 5000, false},
    {"cuMemFree", "cuMemFree", 2000, false},
    {"cuMemFree", "cuMemFree_v2", 3020, false},
    {"cuMemFreeAsync", "cuMemFreeAsync", 11020, false},
    {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", 11020, true},
    {"cuMemGetInfo", "cuMemGetInfo", 2000, false},
    {"cuMemGetInfo", "cuMemGetInfo_v2", 3020, false},
    {"cuDeviceTotalMem", "cuDeviceTotalMem", 2000, false},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020, false},
};

// The two tables must name the same ABI variants: a variant not wrapped
// would hand cuGetProcAddress's caller nothing, a wrapper without its
// variant would be missed when the real pointer is not recognised.
#define EGPU_AS_NAME(name) std::string_view{#name},
constexpr std::string_view kWrappedNames[] = {EGPU_WRAPPED_FUNCTIONS(EGPU_AS_NAME)};
#undef EGPU_AS_NAME

constexpr bool every_variant_is_wrapped() {
  return std::ranges::all_of(kVariants, [](const Variant& v) {
    return std::ranges::find(kWrappedNames, std::string_view{v.abi}) != std::end(kWrappedNames);
  });
}
constexpr bool every_wrapper_is_a_variant() {
  return std::ranges::all_of(kWrappedNames, [](std::string_view name) {
    return std::ranges::any_of(kVariants, [name](const Variant& v) { return name == v.abi; });
  });
}
static_assert(every_variant_is_wrapped(), "kVariants names an ABI variant the shim does not wrap");
static_assert(every_wrapper_is_a_variant(), "a wrapped function has no entry in kVariants");

}  // namespace

void reset_symbol_tables_after_fork() noexcept {
  g_by_name.reset_in_child();
  g_by_real.reset_in_child();
}

void* wrapper_for_name(const char* name) {
  if (!looks_like_cuda_name(name)) return nullptr;
  const NameTable* sorted = by_name();
  if (sorted == nullptr) {  // being sorted by another thread: see built_once.h
    for (const Wrapped& w : kWrapped)
      if (std::strcmp(w.name, name) == 0) return w.wrapper;
    return nullptr;
  }
  auto it =
      std::lower_bound(sorted->begin(), sorted->end(), name,
                       [](const Wrapped* w, const char* n) { return std::strcmp(w->name, n) < 0; });
  if (it == sorted->end() || std::strcmp((*it)->name, name) != 0) return nullptr;
  return (*it)->wrapper;
}

void* wrapper_for_real(void* real) {
  if (real == nullptr) return nullptr;
  const RealToWrapper* t = by_real();
  if (t == nullptr) {  // being built by another thread: see built_once.h
    for (const Wrapped& w : kWrapped)
      if (real_function(w.id) == real) return w.wrapper;
    return nullptr;
  }
  const auto* begin = t->entries.begin();
  const auto* end = begin + t->size;
  auto it = std::lower_bound(begin, end, real,
                             [](const std::pair<void*, void*>& e, void* r) { return e.first < r; });
  if (it == end || it->first != real) return nullptr;
  return it->second;
}

void* wrapper_for_request(const char* api, int cuda_version, bool per_thread) {
  if (!looks_like_cuda_name(api)) return nullptr;
  const Variant* best = nullptr;
  for (const Variant& v : kVariants) {
    if (std::strcmp(v.api, api) != 0 || v.since > cuda_version) continue;
    if (v.per_thread && !per_thread) continue;
    // Prefer the per-thread variant when asked for, then the newest version.
    if (best == nullptr || (v.per_thread && !best->per_thread) ||
        (v.per_thread == best->per_thread && v.since > best->since)) {
      best = &v;
    }
  }
  return best != nullptr ? wrapper_for_name(best->abi) : nullptr;
}

}  // namespace egpu::shim
