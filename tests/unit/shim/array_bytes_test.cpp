#include "shim/array_bytes.h"

#include <gtest/gtest.h>

namespace egpu::shim {
namespace {

TEST(ArrayBytes, PlainFormatsTimesChannels) {
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 1024;
  d.Height = 512;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 4;
  EXPECT_EQ(array_bytes(d), 1024u * 512 * 16);
  d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  d.NumChannels = 1;
  EXPECT_EQ(array_bytes(d), 1024u * 512);
  d.Format = CU_AD_FORMAT_HALF;
  d.NumChannels = 2;
  EXPECT_EQ(array_bytes(d), 1024u * 512 * 4);
}

TEST(ArrayBytes, OneDimensionalArraysHaveHeightZero) {
  CUDA_ARRAY_DESCRIPTOR_v1 d{};
  d.Width = 4096;
  d.Height = 0;
  d.Format = CU_AD_FORMAT_SIGNED_INT32;
  d.NumChannels = 1;
  EXPECT_EQ(array_bytes(d), 4096u * 4);
}

TEST(ArrayBytes, ThreeDimensionsAndLayers) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 64;
  d.Height = 64;
  d.Depth = 32;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT16;
  d.NumChannels = 2;
  EXPECT_EQ(array_bytes(d), 64u * 64 * 32 * 4);
  d.Flags = CUDA_ARRAY3D_LAYERED;  // depth = layers: same size
  EXPECT_EQ(array_bytes(d), 64u * 64 * 32 * 4);
}

TEST(ArrayBytes, SubByteFormatsRoundUp) {
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 3;
  d.Height = 3;
  d.Format = CU_AD_FORMAT_BC1_UNORM;  // half a byte per pixel
  d.NumChannels = 4;
  EXPECT_EQ(array_bytes(d), 5u);
  d.Format = CU_AD_FORMAT_NV12;  // 1.5 bytes per pixel
  d.Width = 1920;
  d.Height = 1080;
  d.NumChannels = 3;
  EXPECT_EQ(array_bytes(d), 1920u * 1080 * 3 / 2);
}

TEST(ArrayBytes, MipmapsSumTheirLevels) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 256;
  d.Height = 256;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  d.NumChannels = 4;
  // 256^2 + 128^2 + 64^2 + 32^2 texels of 4 bytes.
  EXPECT_EQ(mipmapped_array_bytes(d, 4), 4u * (65536 + 16384 + 4096 + 1024));
  // More levels than the size allows stop at 1x1.
  EXPECT_EQ(mipmapped_array_bytes(d, 100), mipmapped_array_bytes(d, 9));
}

TEST(ArrayBytes, LayeredMipmapsKeepTheirLayers) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 16;
  d.Height = 16;
  d.Depth = 6;
  d.Flags = CUDA_ARRAY3D_CUBEMAP;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  EXPECT_EQ(mipmapped_array_bytes(d, 2), 4u * 6 * (256 + 64));
  d.Flags = 0;  // a 3D volume halves its depth too
  EXPECT_EQ(mipmapped_array_bytes(d, 2), 4u * (16 * 16 * 6 + 8 * 8 * 3));
}

}  // namespace
}  // namespace egpu::shim
