// What may be launched: a CUfunction from a module, or a CUkernel from a
// library (CUDA accepts a CUkernel cast to CUfunction).
#pragma once

#include "driver/cuda_api.h"

namespace egpu::simgpu::driver {

bool launchable(CUfunction f);

}  // namespace egpu::simgpu::driver
