// memory-probe's shared helpers and its sharing subcommands
// (memory_probe_share.cpp).
#pragma once

#include <cuda.h>

#include <nlohmann/json.hpp>
#include <string>

namespace memory_probe {

using nlohmann::json;

std::string name_of(CUresult r);
void check(CUresult r, const char* what);  // exits with status 1 on failure
json info();                               // cuMemGetInfo and cuDeviceTotalMem
void hold(int ms);                         // until PROBE_HOLD_UNTIL exists, at most ms
void mark();                               // creates PROBE_MARK
// Resets dev's primary context, makes a fresh one current: info() then.
json info_after_primary_reset(CUdevice dev);

// share-export KIND SIZE / share-import KIND, KIND one of ipc, vmm, pool.
json share_export(CUdevice dev, const std::string& kind, size_t size);
json share_import(CUdevice dev, const std::string& kind);

// ctx-cycle HOW CHUNK ROUNDS, HOW one of create, reset, release
// (memory_probe_contexts.cpp).
json ctx_cycle(CUdevice dev, CUcontext primary, const std::string& how, size_t chunk, int rounds);

// graph-pool SIZE BIG (memory_probe_graphs.cpp).
json graph_pool(CUdevice dev, CUstream stream, size_t size, size_t big);

// pool-keep SIZE BIG (memory_probe_pools.cpp).
json pool_keep(CUdevice dev, CUstream stream, size_t size, size_t big);

}  // namespace memory_probe
