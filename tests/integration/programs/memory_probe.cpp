// memory-probe: exercises the CUDA driver's device-memory API the way
// frameworks do, for the shim's memory-quota tests. Prints one JSON object.
//   memory-probe info                    cuMemGetInfo and cuDeviceTotalMem
//   memory-probe each-api SIZE           every allocation API: alloc, info, free, info
//   memory-probe fill CHUNK [HOLD_MS]    allocate CHUNK until refused, hold, free all
//                                        (PROBE_MARK=FILE: made once all is held)
//                                        (PROBE_HOLD_UNTIL=FILE: hold until FILE exists)
//   memory-probe vmm-release-mapped SIZE create, map, release (the CUDA samples' idiom),
//                                        retain, unmap, release: info after each
//                                        (PROBE_MARK=FILE written while mapped, then
//                                        PROBE_HOLD_UNTIL waited for)
//   memory-probe vmm-fill CHUNK [HOLD_MS] create, map, release CHUNK until refused, hold
//   memory-probe vmm-host SIZE           cuMemCreate of SIZE at a host location (NCCL's
//                                        proxy buffers), mapped: info before, while
//                                        mapped, after release
//   memory-probe ctx-limit HEAP STACK    cuCtxSetLimit of the heap to HEAP, then of the
//                                        stack to STACK, then both back: info after each
//   memory-probe share-export KIND SIZE  ipc|vmm|pool: allocate SIZE and export it to
//   memory-probe share-import KIND       PROBE_HANDLE_FILE; import it from there
//                                        (memory_probe_share.cpp)
//   memory-probe ctx-cycle HOW CHUNK N   N contexts ended with memory allocated in them,
//                                        HOW create|reset|release (memory_probe_contexts.cpp)
//   memory-probe graph-pool SIZE BIG     graph memory: a captured allocation of SIZE
//                                        launched, a plain one beside the pool, trim;
//                                        a graph of BIG (memory_probe_graphs.cpp)
//   memory-probe pool-keep SIZE BIG      stream-ordered pools: a pool that keeps SIZE,
//                                        a plain allocation beside it, trim, threshold 0
//                                        (memory_probe_pools.cpp)
#include "memory_probe.h"

#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace memory_probe {

std::string name_of(CUresult r) {
  const char* n = nullptr;
  cuGetErrorName(r, &n);
  return n != nullptr ? n : std::to_string(static_cast<int>(r));
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "memory-probe: %s failed: %s\n", what, name_of(r).c_str());
    std::exit(1);
  }
}

json info() {
  size_t free_b = 0, total_b = 0, dev_total = 0;
  CUdevice dev;
  check(cuCtxGetDevice(&dev), "cuCtxGetDevice");
  check(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  check(cuDeviceTotalMem(&dev_total, dev), "cuDeviceTotalMem");
  return {{"free", free_b}, {"total", total_b}, {"device_total", dev_total}};
}

json info_after_primary_reset(CUdevice dev) {
  check(cuDevicePrimaryCtxReset(dev), "cuDevicePrimaryCtxReset");
  CUcontext ctx = nullptr;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return info();
}

// Waits until PROBE_HOLD_UNTIL exists (at most `ms`), or `ms` without it.
void hold(int ms) {
  const char* until = std::getenv("PROBE_HOLD_UNTIL");
  const auto hold_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < hold_end) {
    if (until != nullptr && std::filesystem::exists(until)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(until != nullptr ? 20 : ms));
  }
}

void mark() {
  if (const char* path = std::getenv("PROBE_MARK")) {
    if (FILE* f = std::fopen(path, "w")) std::fclose(f);
  }
}

}  // namespace memory_probe

namespace {

using namespace memory_probe;

struct Api {
  const char* name;
  std::function<CUresult(size_t, std::function<CUresult()>*)> alloc;  // sets the matching free
};

std::vector<Api> apis(CUdevice dev, CUstream stream) {
  std::vector<Api> out;
  out.push_back({"cuMemAlloc", [](size_t n, std::function<CUresult()>* f) {
                   CUdeviceptr p = 0;
                   CUresult r = cuMemAlloc(&p, n);
                   *f = [p] { return cuMemFree(p); };
                   return r;
                 }});
  out.push_back({"cuMemAllocPitch", [](size_t n, std::function<CUresult()>* f) {
                   CUdeviceptr p = 0;
                   size_t pitch = 0;
                   // n bytes as 1024-byte rows: the driver's pitch is what counts.
                   CUresult r = cuMemAllocPitch(&p, &pitch, 1024, n / 1024, 4);
                   *f = [p] { return cuMemFree(p); };
                   return r;
                 }});
  out.push_back({"cuMemAllocManaged", [](size_t n, std::function<CUresult()>* f) {
                   CUdeviceptr p = 0;
                   CUresult r = cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL);
                   *f = [p] { return cuMemFree(p); };
                   return r;
                 }});
  out.push_back({"cuMemAllocAsync", [stream](size_t n, std::function<CUresult()>* f) {
                   CUdeviceptr p = 0;
                   CUresult r = cuMemAllocAsync(&p, n, stream);
                   *f = [p, stream] {
                     CUresult fr = cuMemFreeAsync(p, stream);
                     cuStreamSynchronize(stream);
                     return fr;
                   };
                   cuStreamSynchronize(stream);
                   return r;
                 }});
  out.push_back({"cuMemAllocFromPoolAsync", [dev, stream](size_t n, std::function<CUresult()>* f) {
                   CUmemoryPool pool = nullptr;
                   cuDeviceGetDefaultMemPool(&pool, dev);
                   CUdeviceptr p = 0;
                   CUresult r = cuMemAllocFromPoolAsync(&p, n, pool, stream);
                   *f = [p, stream] {
                     CUresult fr = cuMemFreeAsync(p, stream);
                     cuStreamSynchronize(stream);
                     return fr;
                   };
                   cuStreamSynchronize(stream);
                   return r;
                 }});
  out.push_back({"cuMemCreate", [dev](size_t n, std::function<CUresult()>* f) {
                   CUmemAllocationProp prop{};
                   prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
                   prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                   prop.location.id = dev;
                   size_t gran = 0;
                   cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
                   if (gran == 0) gran = 2 << 20;
                   const size_t size = (n + gran - 1) / gran * gran;
                   CUmemGenericAllocationHandle h = 0;
                   CUresult r = cuMemCreate(&h, size, &prop, 0);
                   *f = [h] { return cuMemRelease(h); };
                   return r;
                 }});
  out.push_back({"cuArrayCreate", [](size_t n, std::function<CUresult()>* f) {
                   CUDA_ARRAY_DESCRIPTOR d{};
                   d.Width = 1024;
                   d.Height = n / (1024 * 4);
                   d.Format = CU_AD_FORMAT_FLOAT;
                   d.NumChannels = 1;
                   CUarray a = nullptr;
                   CUresult r = cuArrayCreate(&a, &d);
                   *f = [a] { return cuArrayDestroy(a); };
                   return r;
                 }});
  out.push_back({"cuArray3DCreate", [](size_t n, std::function<CUresult()>* f) {
                   CUDA_ARRAY3D_DESCRIPTOR d{};
                   d.Width = 256;
                   d.Height = 256;
                   d.Depth = n / (256 * 256 * 4);
                   d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
                   d.NumChannels = 4;
                   CUarray a = nullptr;
                   CUresult r = cuArray3DCreate(&a, &d);
                   *f = [a] { return cuArrayDestroy(a); };
                   return r;
                 }});
  out.push_back({"cuMipmappedArrayCreate", [](size_t n, std::function<CUresult()>* f) {
                   CUDA_ARRAY3D_DESCRIPTOR d{};
                   d.Width = 1024;
                   d.Height = n / (1024 * 4);
                   d.Format = CU_AD_FORMAT_FLOAT;
                   d.NumChannels = 1;
                   CUmipmappedArray a = nullptr;
                   CUresult r = cuMipmappedArrayCreate(&a, &d, 1);
                   *f = [a] { return cuMipmappedArrayDestroy(a); };
                   return r;
                 }});
  return out;
}

CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

// Create, map, release: only the mapping holds the memory afterwards.
CUresult map_released(CUdevice dev, size_t size, CUdeviceptr* va) {
  const CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle h = 0;
  if (CUresult r = cuMemCreate(&h, size, &prop, 0); r != CUDA_SUCCESS) return r;
  check(cuMemAddressReserve(va, size, 0, 0, 0), "cuMemAddressReserve");
  check(cuMemMap(*va, size, 0, h, 0), "cuMemMap");
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(cuMemSetAccess(*va, size, &access, 1), "cuMemSetAccess");
  check(cuMemRelease(h), "cuMemRelease");
  return CUDA_SUCCESS;
}

json vmm_release_mapped(CUdevice dev, size_t size) {
  json out;
  CUdeviceptr va = 0;
  check(map_released(dev, size, &va), "cuMemCreate");
  out["released_mapped"] = info();
  CUmemGenericAllocationHandle retained = 0;
  check(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)),
        "cuMemRetainAllocationHandle");
  mark();
  hold(30000);
  check(cuMemUnmap(va, size), "cuMemUnmap");
  out["unmapped_retained"] = info();
  check(cuMemRelease(retained), "cuMemRelease(retained)");
  out["released_all"] = info();
  check(cuMemAddressFree(va, size), "cuMemAddressFree");
  return out;
}

json vmm_host(size_t size) {
  json out;
  out["before"] = info();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  const CUresult created = cuMemCreate(&h, size, &prop, 0);
  out["create"] = name_of(created);
  if (created != CUDA_SUCCESS) return out;
  CUdeviceptr va = 0;
  check(cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve");
  check(cuMemMap(va, size, 0, h, 0), "cuMemMap");
  check(cuMemRelease(h), "cuMemRelease");
  out["mapped"] = info();
  check(cuMemUnmap(va, size), "cuMemUnmap");
  check(cuMemAddressFree(va, size), "cuMemAddressFree");
  out["after"] = info();
  return out;
}

json vmm_fill(CUdevice dev, size_t chunk, int hold_ms) {
  json out;
  std::vector<CUdeviceptr> held;
  CUresult last = CUDA_SUCCESS;
  while (held.size() < 100000) {
    CUdeviceptr va = 0;
    last = map_released(dev, chunk, &va);
    if (last != CUDA_SUCCESS) break;
    held.push_back(va);
  }
  out["allocated"] = held.size() * chunk;
  out["stopped_by"] = name_of(last);
  out["during"] = info();
  mark();
  hold(hold_ms);
  for (CUdeviceptr va : held) {
    check(cuMemUnmap(va, chunk), "cuMemUnmap");
    check(cuMemAddressFree(va, chunk), "cuMemAddressFree");
  }
  return out;
}

json ctx_limit(size_t heap, size_t stack) {
  json out;
  size_t old_heap = 0, old_stack = 0;
  check(cuCtxGetLimit(&old_heap, CU_LIMIT_MALLOC_HEAP_SIZE), "cuCtxGetLimit");
  check(cuCtxGetLimit(&old_stack, CU_LIMIT_STACK_SIZE), "cuCtxGetLimit");
  out["heap"] = name_of(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, heap));
  out["after_heap"] = info();
  out["stack"] = name_of(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, stack));
  out["after_stack"] = info();
  check(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, old_heap), "cuCtxSetLimit(heap back)");
  check(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, old_stack), "cuCtxSetLimit(stack back)");
  out["lowered"] = info();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: memory-probe info | each-api SIZE | fill CHUNK [HOLD_MS]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  const int device = std::getenv("PROBE_DEVICE") ? std::atoi(std::getenv("PROBE_DEVICE")) : 0;
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, device), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUstream stream;
  check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  json out;
  out["before"] = info();
  if (cmd == "info") {
    // nothing more
  } else if (cmd == "each-api" && argc >= 3) {
    const size_t size = std::strtoull(argv[2], nullptr, 10);
    json results = json::object();
    for (const Api& api : apis(dev, stream)) {
      std::function<CUresult()> release;
      json r;
      const size_t free_before = info()["free"];
      CUresult ar = api.alloc(size, &release);
      r["alloc"] = name_of(ar);
      r["free_drop"] = static_cast<long long>(free_before) -
                       static_cast<long long>(info()["free"].get<size_t>());
      if (ar == CUDA_SUCCESS) r["release"] = name_of(release());
      r["free_after_release"] = info()["free"];
      results[api.name] = r;
    }
    out["apis"] = results;
  } else if (cmd == "fill" && argc >= 3) {
    const size_t chunk = std::strtoull(argv[2], nullptr, 10);
    const int hold_ms = argc >= 4 ? std::atoi(argv[3]) : 0;
    // PROBE_BARRIER (a directory): start together with other probes. Once
    // attached, say so (DIR/ready-PID) and wait for DIR/go, which the test
    // makes when every probe is ready (60 s at most).
    if (const char* dir = std::getenv("PROBE_BARRIER")) {
      std::ofstream(std::string(dir) + "/ready-" + std::to_string(getpid())).put('1');
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!std::filesystem::exists(std::string(dir) + "/go") &&
             std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::vector<CUdeviceptr> held;
    CUresult last = CUDA_SUCCESS;
    while (held.size() < 100000) {
      CUdeviceptr p = 0;
      last = cuMemAlloc(&p, chunk);
      if (last != CUDA_SUCCESS) break;
      held.push_back(p);
    }
    out["allocated"] = held.size() * chunk;
    out["stopped_by"] = name_of(last);
    out["during"] = info();
    mark();  // PROBE_MARK: all it could get is held
    // PROBE_HOLD_UNTIL (a path): stop holding early once it exists, so a
    // test decides when the probe ends instead of guessing how long it needs.
    const char* until = std::getenv("PROBE_HOLD_UNTIL");
    const auto hold_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(hold_ms);
    while (std::chrono::steady_clock::now() < hold_end) {
      if (until != nullptr && std::filesystem::exists(until)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(until != nullptr ? 50 : hold_ms));
    }
    for (auto p : held)
      check(cuMemFree(p), "cuMemFree");
  } else if (cmd == "vmm-release-mapped" && argc >= 3) {
    out["vmm"] = vmm_release_mapped(dev, std::strtoull(argv[2], nullptr, 10));
  } else if (cmd == "vmm-host" && argc >= 3) {
    out["vmm"] = vmm_host(std::strtoull(argv[2], nullptr, 10));
  } else if (cmd == "vmm-fill" && argc >= 3) {
    out.update(
        vmm_fill(dev, std::strtoull(argv[2], nullptr, 10), argc >= 4 ? std::atoi(argv[3]) : 0));
  } else if (cmd == "share-export" && argc >= 4) {
    out["export"] = share_export(dev, argv[2], std::strtoull(argv[3], nullptr, 10));
  } else if (cmd == "share-import" && argc >= 3) {
    out["import"] = share_import(dev, argv[2]);
  } else if (cmd == "ctx-cycle" && argc >= 5) {
    out["rounds"] =
        ctx_cycle(dev, ctx, argv[2], std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]));
  } else if (cmd == "graph-pool" && argc >= 4) {
    out["graphs"] = graph_pool(dev, stream, std::strtoull(argv[2], nullptr, 10),
                               std::strtoull(argv[3], nullptr, 10));
  } else if (cmd == "pool-keep" && argc >= 4) {
    out["pools"] = pool_keep(dev, stream, std::strtoull(argv[2], nullptr, 10),
                             std::strtoull(argv[3], nullptr, 10));
  } else if (cmd == "ctx-limit" && argc >= 4) {
    out["limits"] =
        ctx_limit(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10));
  } else {
    std::fprintf(stderr, "memory-probe: unknown command '%s'\n", cmd.c_str());
    return 2;
  }
  out["after"] = info();
  std::printf("%s\n", out.dump().c_str());
  cuStreamDestroy(stream);
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}
