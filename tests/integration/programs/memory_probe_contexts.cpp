// memory-probe ctx-cycle HOW CHUNK ROUNDS: contexts that come and go with
// memory still allocated in them (the driver frees it with the context).
// Each round makes a context current, allocates CHUNK bytes (cuMemAlloc) and
// a CHUNK/4-byte array, and ends the context without freeing either:
//   create   cuCtxCreate ... cuCtxDestroy
//   reset    cuDevicePrimaryCtxRetain ... cuDevicePrimaryCtxReset
//   release  cuDevicePrimaryCtxRetain twice ... cuDevicePrimaryCtxRelease
//            twice (the first is not the last reference: nothing is freed;
//            "free_retained" is cuMemGetInfo's free then)
// The primary context main() retained is left current and usable at the end.
#include <cuda.h>

#include <nlohmann/json.hpp>
#include <string>

#include "memory_probe.h"

namespace memory_probe {
namespace {

json allocate_in_current(size_t chunk) {
  json round;
  CUdeviceptr p = 0;
  round["alloc"] = name_of(cuMemAlloc(&p, chunk));
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 1024;
  d.Height = chunk / 4 / (1024 * 4);
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  CUarray a = nullptr;
  round["array"] = name_of(cuArrayCreate(&a, &d));
  round["free_held"] = info()["free"];
  return round;
}

json created_round(CUdevice dev, CUcontext primary, size_t chunk) {
  CUcontext ctx = nullptr;
  check(cuCtxCreate(&ctx, nullptr, 0, dev), "cuCtxCreate");
  json round = allocate_in_current(chunk);
  round["end"] = name_of(cuCtxDestroy(ctx));
  check(cuCtxSetCurrent(primary), "cuCtxSetCurrent");
  return round;
}

json primary_round(CUdevice dev, const std::string& how, size_t chunk) {
  CUcontext ctx = nullptr;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  if (how == "reset") {
    json round = allocate_in_current(chunk);
    round["end"] = name_of(cuDevicePrimaryCtxReset(dev));
    return round;
  }
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  json round = allocate_in_current(chunk);
  round["end_retained"] = name_of(cuDevicePrimaryCtxRelease(dev));
  round["free_retained"] = info()["free"];
  round["end"] = name_of(cuDevicePrimaryCtxRelease(dev));
  return round;
}

}  // namespace

json ctx_cycle(CUdevice dev, CUcontext primary, const std::string& how, size_t chunk, int rounds) {
  json out;
  if (how != "create") {
    // Rounds own the primary context: main()'s reference would keep it alive.
    check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
  }
  for (int i = 0; i < rounds; ++i)
    out.push_back(how == "create" ? created_round(dev, primary, chunk)
                                  : primary_round(dev, how, chunk));
  if (how != "create") {
    // main()'s reference again, for its final cuMemGetInfo and release.
    CUcontext ctx = nullptr;
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  return out;
}

}  // namespace memory_probe
