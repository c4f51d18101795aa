// memory-probe pool-keep SIZE BIG: stream-ordered pools. With the release
// threshold at its maximum (PyTorch's cudaMallocAsync backend) the current
// pool keeps a freed allocation of SIZE: a plain allocation of SIZE is tried
// beside it, then one from the pool, the pool is trimmed and the plain one
// tried again; with the threshold at 0 a synchronisation gives the memory
// back; a pool allocation of BIG is tried; a pool of its own keeps SIZE
// until destroyed. Memory info between.
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
  return out;
}

}  // namespace memory_probe
