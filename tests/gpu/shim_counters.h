// tests/gpu/shim_counters.h: the egpu shim's per-wrapper call counters
// (EGPU_DEBUG=1) as JSON, for validate's CUDA programs (cudart_greedy.cu,
// nccl_allreduce.cu); tests/gpu/shim_counters.py is its Python twin for the
// torch programs (the family totals validate reads are named alike in both).
// Every ABI variant of an API is counted: a program may reach the driver
// through any of them.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <string>

// {"loaded":false} without the shim; else every counter named here and each
// family's total.
inline std::string shim_counters_json() {
  using CountFn = uint64_t (*)(const char*);
  const auto count = reinterpret_cast<CountFn>(dlsym(RTLD_DEFAULT, "egpu_shim_wrapper_calls"));
  if (count == nullptr) return "{\"loaded\":false}";
  struct Family {
    const char* total;
    const char* names[7];
  };
  const Family families[] = {
      {"launch_wrappers_total",
       {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
        "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", nullptr}},
      {"graph_launches_total", {"cuGraphLaunch", "cuGraphLaunch_ptsz", nullptr}},
      {"proc_address_total", {"cuGetProcAddress", "cuGetProcAddress_v2", nullptr}},
      {"syncs_total",
       {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuCtxSynchronize",
        "cuCtxSynchronize_v2", nullptr}},
      {"allocations_total",
       {"cuMemAlloc", "cuMemAlloc_v2", "cuMemAllocAsync", "cuMemAllocAsync_ptsz", nullptr}},
      {"vmm_creates_total", {"cuMemCreate", nullptr}},
      {"memory_queries_total", {"cuMemGetInfo", "cuMemGetInfo_v2", nullptr}},
  };
  std::string out = "{\"loaded\":true,\"calls\":{";
  for (const Family& f : families) {
    uint64_t total = 0;
    for (const char* const* name = f.names; *name != nullptr; ++name) {
      const uint64_t n = count(*name);
      total += n;
      out += "\"" + std::string(*name) + "\":" + std::to_string(n) + ",";
    }
    out += "\"" + std::string(f.total) + "\":" + std::to_string(total) + ",";
  }
  out.back() = '}';
  return out + "}";
}
