// CUDA arrays and mipmapped arrays: accounted by size (width x height x depth
// x element size; mip levels summed), no storage.
#include "driver/cuda_api.h"
// after cuda.h:
#include <algorithm>
#include <memory>
#include <type_traits>

#include "driver/contexts.h"
#include "driver/driver_state.h"
#include "driver/memory_accounting.h"

using egpu::simgpu::AllocationKind;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
namespace drv = egpu::simgpu::driver;

namespace {

uint64_t format_bytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
      return 2;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
      return 8;
    default:  // 32-bit channels, packed formats, block-compressed: 4 is close enough
      return 4;
  }
}

uint64_t extent_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned int level) {
  const uint64_t w = std::max<uint64_t>(d.Width >> level, 1);
  const uint64_t h = d.Height == 0 ? 1 : std::max<uint64_t>(d.Height >> level, 1);
  const uint64_t depth = d.Depth == 0 ? 1 : std::max<uint64_t>(d.Depth >> level, 1);
  return w * h * depth * format_bytes(d.Format) * std::max(d.NumChannels, 1u);
}

template <class Handle>
CUresult create(Handle** out, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned int levels,
                AllocationKind kind) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (out == nullptr || desc.Width == 0 || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  uint64_t bytes = 0;
  for (unsigned int level = 0; level < levels; ++level)
    bytes += extent_bytes(desc, level);
  uint64_t address = 0;
  if (const CUresult rc = drv::account_allocation(ctx, bytes, kind, &address); rc != CUDA_SUCCESS) {
    return rc;
  }
  auto handle = std::make_unique<Handle>();
  handle->physical = ctx->physical;
  handle->address = address;
  handle->bytes = bytes;
  if constexpr (std::is_same_v<Handle, CUarray_st>) handle->descriptor = desc;
  *out = registry().adopt(std::move(handle));
  return CUDA_SUCCESS;
}

template <class Handle>
CUresult destroy(const void* handle) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  Handle* object = registry().find<Handle>(handle);
  if (object == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  drv::release_allocation(object->address);
  registry().destroy(object);
  return CUDA_SUCCESS;
}

CUDA_ARRAY3D_DESCRIPTOR from_2d(size_t width, size_t height, CUarray_format format,
                                unsigned int channels) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = width;
  d.Height = height;
  d.Depth = 0;
  d.Format = format;
  d.NumChannels = channels;
  return d;
}

}  // namespace

extern "C" {

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  return guarded([&] {
    if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return create(pHandle, from_2d(desc->Width, desc->Height, desc->Format, desc->NumChannels), 1,
                  AllocationKind::kArray);
  });
}

CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  return guarded([&] {
    if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return create(pHandle, from_2d(desc->Width, desc->Height, desc->Format, desc->NumChannels), 1,
                  AllocationKind::kArray);
  });
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  return guarded([&] {
    if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return create(pHandle, *desc, 1, AllocationKind::kArray);
  });
}

CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  return guarded([&] {
    if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = from_2d(desc->Width, desc->Height, desc->Format, desc->NumChannels);
    d.Depth = desc->Depth;
    d.Flags = desc->Flags;
    return create(pHandle, d, 1, AllocationKind::kArray);
  });
}

CUresult cuArrayDestroy(CUarray hArray) {
  return guarded([&] { return destroy<CUarray_st>(hArray); });
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
  return guarded([&] {
    CUarray_st* array = registry().find<CUarray_st>(hArray);
    if (array == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (pArrayDescriptor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    pArrayDescriptor->Width = array->descriptor.Width;
    pArrayDescriptor->Height = array->descriptor.Height;
    pArrayDescriptor->Format = array->descriptor.Format;
    pArrayDescriptor->NumChannels = array->descriptor.NumChannels;
    return CUDA_SUCCESS;
  });
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
  return guarded([&] {
    CUarray_st* array = registry().find<CUarray_st>(hArray);
    if (array == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (pArrayDescriptor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = array->descriptor;
    return CUDA_SUCCESS;
  });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                unsigned int numMipmapLevels) {
  return guarded([&] {
    if (pMipmappedArrayDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return create(pHandle, *pMipmappedArrayDesc, numMipmapLevels, AllocationKind::kMipmappedArray);
  });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  return guarded([&] { return destroy<CUmipmappedArray_st>(hMipmappedArray); });
}

}  // extern "C"
