// Device memory of CUDA arrays, estimated from their descriptors (the driver
// does not say): width x height x depth x element size, summed over mipmap
// levels. Padding and alignment make the real footprint somewhat larger.
#pragma once

#include <cstdint>

#include "shim/cuda_api.h"

namespace egpu::shim {

uint64_t array_bytes(const CUDA_ARRAY_DESCRIPTOR& d);
uint64_t array_bytes(const CUDA_ARRAY_DESCRIPTOR_v1& d);
uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d);
uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR_v1& d);
uint64_t mipmapped_array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned int levels);

}  // namespace egpu::shim
