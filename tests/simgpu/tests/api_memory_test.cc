// Memory accounting through the exported API: every allocation path counts
// against the device, cuMemGetInfo reports it, contexts free what they own.
#include <cstring>

#include "api_fixture.h"

namespace egpu::simgpu::testing {
namespace {

constexpr size_t kTotal = kApiMemoryMb * kMiB;

TEST_F(ApiTest, AllocationsCountUntilOutOfMemory) {
  EXPECT_EQ(free_memory(), kTotal);
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 100 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 100 * kMiB);
  EXPECT_EQ(cuMemAlloc(&b, kTotal - 100 * kMiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemAlloc(&b, kTotal - 100 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(b), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  CUdeviceptr c = 0;
  ASSERT_EQ(cuMemAlloc(&c, 1), CUDA_SUCCESS);
  EXPECT_GT(c, b);  // addresses are never reused
  EXPECT_EQ(cuMemAlloc(&c, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ApiTest, PitchAndManagedAllocationsCount) {
  CUdeviceptr p = 0;
  size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch(&p, &pitch, 1000, 100, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(free_memory(), kTotal - 1024 * 100);
  CUdeviceptr m = 0;
  ASSERT_EQ(cuMemAllocManaged(&m, 10 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 1024 * 100 - 10 * kMiB);
  unsigned int managed = 0;
  EXPECT_EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m), CUDA_SUCCESS);
  EXPECT_EQ(managed, 1u);
  cuMemFree(p);
  cuMemFree(m);
  EXPECT_EQ(free_memory(), kTotal);
}

TEST_F(ApiTest, PointerAttributesAndAddressRanges) {
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  unsigned int type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 100), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  int ordinal = -1;
  EXPECT_EQ(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 0);
  CUcontext owner = nullptr;
  EXPECT_EQ(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS);
  EXPECT_EQ(owner, ctx_);
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, p + 4000), CUDA_SUCCESS);
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 4096u);
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, p + 4096), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 12345),
            CUDA_ERROR_INVALID_VALUE);
  cuMemFree(p);
}

TEST_F(ApiTest, AsyncAndPoolAllocationsCount) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAllocAsync(&a, 10 * kMiB, stream), CUDA_SUCCESS);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  CUdeviceptr b = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&b, 20 * kMiB, pool, stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 30 * kMiB);
  CUmemoryPool default_pool = nullptr;
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&default_pool, 0), CUDA_SUCCESS);
  EXPECT_NE(default_pool, nullptr);
  EXPECT_EQ(cuMemPoolDestroy(default_pool), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFreeAsync(a, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(b, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
  cuStreamDestroy(stream);
}

uint64_t pool_figure(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t value = ~cuuint64_t{0};
  EXPECT_EQ(cuMemPoolGetAttribute(pool, attr, &value), CUDA_SUCCESS);
  return value;
}

// A pool keeps what is freed for its next allocations; a synchronisation
// gives back what is above its release threshold, cuMemPoolTrimTo the rest.
TEST_F(ApiTest, PoolsKeepFreedMemoryUpToTheirReleaseThreshold) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAllocAsync(&a, 100 * kMiB, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(a, stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 100 * kMiB);  // kept
  EXPECT_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 100 * kMiB);
  EXPECT_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  ASSERT_EQ(cuMemAllocAsync(&a, 60 * kMiB, stream), CUDA_SUCCESS);  // from what it kept
  EXPECT_EQ(free_memory(), kTotal - 100 * kMiB);
  EXPECT_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 100 * kMiB);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);  // threshold 0: all it keeps goes
  EXPECT_EQ(free_memory(), kTotal - 60 * kMiB);
  cuuint64_t threshold = 1024 * kMiB;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(a, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 60 * kMiB);  // under the threshold: kept
  EXPECT_EQ(cuMemPoolTrimTo(pool, 20 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 20 * kMiB);
  EXPECT_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 100 * kMiB);
  EXPECT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  // Without opportunistic reuse, what was freed is reused only once a
  // synchronisation passed: until then the pool grows instead.
  int reuse = 0;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&a, 50 * kMiB, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(a, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&a, 50 * kMiB, stream), CUDA_SUCCESS);
  EXPECT_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 100 * kMiB);
  ASSERT_EQ(cuMemFreeAsync(a, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&a, 50 * kMiB, stream), CUDA_SUCCESS);
  EXPECT_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 100 * kMiB);
  ASSERT_EQ(cuMemFreeAsync(a, stream), CUDA_SUCCESS);
  reuse = 1;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse),
            CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  threshold = 0;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
            CUDA_SUCCESS);
  cuStreamDestroy(stream);
}

TEST_F(ApiTest, VirtualMemoryManagementCountsPhysicalAllocations) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(granularity, 2 * kMiB);
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cuMemCreate(&handle, 3 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemCreate(&handle, 64 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 64 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 64 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_EQ(cuMemSetAccess(va, 64 * kMiB, &access, 1), CUDA_SUCCESS);
  EXPECT_EQ(cuMemUnmap(va, 64 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va, 64 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
}

// Like the driver: the physical memory lives until it is both released (every
// reference, a retained one too) and unmapped (every range).
TEST_F(ApiTest, VirtualMemoryIsFreedAtTheLastOfReleaseAndUnmap) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 64 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 128 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 64 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + 64 * kMiB, 32 * kMiB, 32 * kMiB, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va, 64 * kMiB, 32 * kMiB, handle, 0),
            CUDA_ERROR_INVALID_VALUE);  // past its end
  // The samples' idiom: create, map, release; the mapping keeps the memory.
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);
  EXPECT_EQ(cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE);  // no reference left
  // A retained handle is one more reference.
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)), CUDA_SUCCESS);
  EXPECT_EQ(retained, handle);
  EXPECT_EQ(cuMemUnmap(va, 64 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);  // one mapping and the retained reference left
  EXPECT_EQ(cuMemUnmap(va + 64 * kMiB, 32 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);  // the retained reference
  EXPECT_EQ(cuMemRelease(retained), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  // Released before unmapped, in one range: freed at the unmap.
  ASSERT_EQ(cuMemCreate(&handle, 64 * kMiB, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 64 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);
  EXPECT_EQ(cuMemUnmap(va, 128 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  EXPECT_EQ(cuMemAddressFree(va, 128 * kMiB), CUDA_SUCCESS);
}

// The heap, printf FIFO and stack are device memory of the context beyond the
// defaults (8 MiB, 1 MiB, 1 KiB per thread of 132 SMs x 2048 threads).
TEST_F(ApiTest, ContextLimitsChargeDeviceMemory) {
  const uint64_t threads = 132 * 2048;
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 512 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 504 * kMiB);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 256 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 248 * kMiB);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 9 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 256 * kMiB);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 256 * kMiB - 1024 * threads);
  // More than the device has: refused, the old value stays.
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, kTotal), CUDA_ERROR_OUT_OF_MEMORY);
  size_t heap = 0;
  ASSERT_EQ(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(heap, 256 * kMiB);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 1 * kMiB), CUDA_SUCCESS);  // below the default
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
  // A context's limits go with it.
  CUcontext other = nullptr;
  ASSERT_EQ(cuCtxCreate(&other, nullptr, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 72 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 64 * kMiB);
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(other), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
}

TEST_F(ApiTest, ArraysCountBySize) {
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = 1024;
  desc.Height = 1024;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 4;
  CUarray array = nullptr;
  ASSERT_EQ(cuArrayCreate(&array, &desc), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 16 * kMiB);
  CUDA_ARRAY3D_DESCRIPTOR desc3{};
  desc3.Width = 256;
  desc3.Height = 256;
  desc3.Depth = 16;
  desc3.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  desc3.NumChannels = 1;
  CUarray volume = nullptr;
  ASSERT_EQ(cuArray3DCreate(&volume, &desc3), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 17 * kMiB);
  CUDA_ARRAY3D_DESCRIPTOR mip{};
  mip.Width = 1024;
  mip.Height = 1024;
  mip.Format = CU_AD_FORMAT_FLOAT;
  mip.NumChannels = 1;
  CUmipmappedArray mipmapped = nullptr;
  ASSERT_EQ(cuMipmappedArrayCreate(&mipmapped, &mip, 3), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 17 * kMiB - (4 * kMiB + kMiB + kMiB / 4));
  EXPECT_EQ(cuArrayDestroy(array), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(volume), CUDA_SUCCESS);
  EXPECT_EQ(cuMipmappedArrayDestroy(mipmapped), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal);
}

TEST_F(ApiTest, DestroyingAContextFreesItsMemory) {
  CUcontext other = nullptr;
  ASSERT_EQ(cuCtxCreate(&other, nullptr, 0, 0), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 200 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), kTotal - 200 * kMiB);
  ASSERT_EQ(cuCtxDestroy(other), CUDA_SUCCESS);  // pops it: ctx_ is current again
  EXPECT_EQ(free_memory(), kTotal);
}

TEST_F(ApiTest, HostMemoryIsRealAndNotDeviceAccounted) {
  void* host = nullptr;
  ASSERT_EQ(cuMemAllocHost(&host, 64 * kMiB), CUDA_SUCCESS);
  std::memset(host, 0x5a, 64 * kMiB);
  EXPECT_EQ(free_memory(), kTotal);
  unsigned int type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(host)),
            CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
  EXPECT_EQ(cuMemFreeHost(host), CUDA_SUCCESS);
  void* mapped = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&mapped, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
  unsigned int flags = 0;
  EXPECT_EQ(cuMemHostGetFlags(&flags, mapped), CUDA_SUCCESS);
  EXPECT_EQ(flags, static_cast<unsigned>(CU_MEMHOSTALLOC_DEVICEMAP));
  EXPECT_EQ(cuMemFreeHost(mapped), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(mapped), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace egpu::simgpu::testing
