// memory-probe pool-keep SIZE BIG: stream-ordered pools. With the release
// threshold at its maximum (PyTorch's cudaMallocAsync backend) the current
// pool keeps a freed allocation of SIZE: a plain allocation of SIZE is tried
// beside it, then one from the pool, the pool is trimmed and the plain one
// tried again; with the threshold at 0 a synchronisation gives the memory
// back; a pool allocation of BIG is tried; a pool of its own keeps SIZE
// until destroyed; without opportunistic reuse the pool grows by BIG/4 a
// round; a pool destroyed with a live allocation; the context's reset.
// Memory info between.
#include "memory_probe.h"

namespace memory_probe {
namespace {

uint64_t pool_reserved(CUmemoryPool pool) {
  cuuint64_t value = 0;
  check(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value),
        "cuMemPoolGetAttribute");
  return value;
}

void set_threshold(CUmemoryPool pool, cuuint64_t bytes) {
  check(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &bytes),
        "cuMemPoolSetAttribute");
}

std::string plain_alloc(size_t size) {
  CUdeviceptr p = 0;
  const CUresult r = cuMemAlloc(&p, size);
  if (r == CUDA_SUCCESS) check(cuMemFree(p), "cuMemFree");
  return name_of(r);
}

// An allocation of `size` from the pool, freed at once (stream-ordered).
std::string pool_alloc(CUstream stream, size_t size) {
  CUdeviceptr p = 0;
  const CUresult r = cuMemAllocAsync(&p, size, stream);
  if (r == CUDA_SUCCESS) check(cuMemFreeAsync(p, stream), "cuMemFreeAsync");
  return name_of(r);
}

}  // namespace

json pool_keep(CUdevice dev, CUstream stream, size_t size, size_t big) {
  json out;
  CUmemoryPool pool = nullptr;
  check(cuDeviceGetMemPool(&pool, dev), "cuDeviceGetMemPool");
  set_threshold(pool, ~cuuint64_t{0});
  out["alloc"] = pool_alloc(stream, size);
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["kept"] = info();
  out["reserved"] = pool_reserved(pool);
  out["alloc_beside_pool"] = plain_alloc(size);
  out["realloc"] = pool_alloc(stream, size);  // what the pool keeps
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["trim"] = name_of(cuMemPoolTrimTo(pool, 0));
  out["trimmed"] = info();
  out["alloc_after_trim"] = plain_alloc(size);
  set_threshold(pool, 0);
  out["alloc_at_0"] = pool_alloc(stream, size);
  out["freed_unsynced"] = info();
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["synced"] = info();
  out["too_big"] = pool_alloc(stream, big);
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["after_big"] = info();
  // A pool of its own that keeps what it had, then destroyed.
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = dev;
  CUmemoryPool own = nullptr;
  check(cuMemPoolCreate(&own, &props), "cuMemPoolCreate");
  set_threshold(own, ~cuuint64_t{0});
  CUdeviceptr p = 0;
  check(cuMemAllocFromPoolAsync(&p, size, own, stream), "cuMemAllocFromPoolAsync");
  check(cuMemFreeAsync(p, stream), "cuMemFreeAsync");
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["own_kept"] = info();
  out["own_destroy"] = name_of(cuMemPoolDestroy(own));
  out["own_destroyed"] = info();

  // Without opportunistic reuse the pool may grow round after round while
  // what it freed waits for a synchronisation (simgpu does; a real driver
  // reuses a free on the same stream): its free part is then no credit.
  int reuse = 0;
  check(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse),
        "cuMemPoolSetAttribute");
  set_threshold(pool, ~cuuint64_t{0});
  const size_t round = big / 4;
  int rounds = 0;
  for (; rounds < 6; ++rounds) {
    if (pool_alloc(stream, round) != "CUDA_SUCCESS") break;
  }
  out["growth_rounds"] = rounds;
  out["growth_reserved"] = pool_reserved(pool);
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  reuse = 1;
  check(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse),
        "cuMemPoolSetAttribute");
  check(cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo");
  set_threshold(pool, 0);

  // A pool destroyed with a live allocation: the allocation still holds it.
  check(cuMemPoolCreate(&own, &props), "cuMemPoolCreate");
  check(cuMemAllocFromPoolAsync(&p, size, own, stream), "cuMemAllocFromPoolAsync");
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  out["live_destroy"] = name_of(cuMemPoolDestroy(own));
  out["alloc_beside_live"] = plain_alloc(size);
  check(cuMemFree(p), "cuMemFree");
  // The primary context's reset frees everything: nothing stays charged.
  out["after_reset"] = info_after_primary_reset(dev);
  return out;
}

}  // namespace memory_probe
