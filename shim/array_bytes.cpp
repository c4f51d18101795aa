#include "shim/array_bytes.h"

#include <algorithm>

namespace egpu::shim {
namespace {

// Bytes per element as a fraction (sub-sampled video and block-compressed
// formats take less than a byte per channel).
struct ElementSize {
  uint64_t num;
  uint64_t den;
};

ElementSize element_size(CUarray_format format, unsigned int channels) {
  const uint64_t ch = std::max(channels, 1u);
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return {ch, 1};
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return {2 * ch, 1};
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return {4 * ch, 1};
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
      return {1, 1};
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
      return {2, 1};
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
    case CU_AD_FORMAT_UNORM_INT_101010_2:
      return {4, 1};
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
      return {8, 1};
    // 4x4 blocks of 8 bytes (BC1, BC4) or 16 bytes (the others).
    case CU_AD_FORMAT_BC1_UNORM:
    case CU_AD_FORMAT_BC1_UNORM_SRGB:
    case CU_AD_FORMAT_BC4_UNORM:
    case CU_AD_FORMAT_BC4_SNORM:
      return {1, 2};
    case CU_AD_FORMAT_BC2_UNORM:
    case CU_AD_FORMAT_BC2_UNORM_SRGB:
    case CU_AD_FORMAT_BC3_UNORM:
    case CU_AD_FORMAT_BC3_UNORM_SRGB:
    case CU_AD_FORMAT_BC5_UNORM:
    case CU_AD_FORMAT_BC5_SNORM:
    case CU_AD_FORMAT_BC6H_UF16:
    case CU_AD_FORMAT_BC6H_SF16:
    case CU_AD_FORMAT_BC7_UNORM:
    case CU_AD_FORMAT_BC7_UNORM_SRGB:
      return {1, 1};
    // Video formats: luma plus sub-sampled chroma.
    case CU_AD_FORMAT_NV12:
      return {3, 2};
    case CU_AD_FORMAT_P010:
    case CU_AD_FORMAT_P016:
      return {3, 1};
    case CU_AD_FORMAT_NV16:
    case CU_AD_FORMAT_YUY2:
      return {2, 1};
    case CU_AD_FORMAT_P210:
    case CU_AD_FORMAT_P216:
    case CU_AD_FORMAT_Y210:
    case CU_AD_FORMAT_Y216:
    case CU_AD_FORMAT_AYUV:
    case CU_AD_FORMAT_Y410:
      return {4, 1};
    case CU_AD_FORMAT_Y416:
      return {8, 1};
    case CU_AD_FORMAT_Y444_PLANAR8:
    case CU_AD_FORMAT_YUV444_8bit_SemiPlanar:
      return {3, 1};
    case CU_AD_FORMAT_Y444_PLANAR10:
    case CU_AD_FORMAT_YUV444_16bit_SemiPlanar:
      return {6, 1};
    default:
      return {4 * ch, 1};  // unknown: assume the widest plain format
  }
}

uint64_t level_bytes(uint64_t width, uint64_t height, uint64_t depth, ElementSize e) {
  const uint64_t elements =
      std::max<uint64_t>(width, 1) * std::max<uint64_t>(height, 1) * std::max<uint64_t>(depth, 1);
  return (elements * e.num + e.den - 1) / e.den;
}

}  // namespace

uint64_t array_bytes(const CUDA_ARRAY_DESCRIPTOR& d) {
  return level_bytes(d.Width, d.Height, 1, element_size(d.Format, d.NumChannels));
}

uint64_t array_bytes(const CUDA_ARRAY_DESCRIPTOR_v1& d) {
  return level_bytes(d.Width, d.Height, 1, element_size(d.Format, d.NumChannels));
}

uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  return level_bytes(d.Width, d.Height, d.Depth, element_size(d.Format, d.NumChannels));
}

uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR_v1& d) {
  return level_bytes(d.Width, d.Height, d.Depth, element_size(d.Format, d.NumChannels));
}

uint64_t mipmapped_array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned int levels) {
  const ElementSize e = element_size(d.Format, d.NumChannels);
  // Layers (and cubemap faces) do not shrink with the level; depth does.
  const bool layered = (d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  uint64_t total = 0;
  uint64_t w = d.Width, h = d.Height, depth = d.Depth;
  for (unsigned int level = 0; level < std::max(levels, 1u); ++level) {
    total += level_bytes(w, h, depth, e);
    if (w <= 1 && h <= 1 && (layered || depth <= 1)) break;
    w = std::max<uint64_t>(w / 2, 1);
    if (h > 0) h = std::max<uint64_t>(h / 2, 1);
    if (!layered && depth > 0) depth = std::max<uint64_t>(depth / 2, 1);
  }
  return total;
}

}  // namespace egpu::shim
