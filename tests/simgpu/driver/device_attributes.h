// Device attributes of the simulated GPU: an H100 SXM5 80GB (compute
// capability 9.0, 132 SMs).
#pragma once

#include "driver/cuda_api.h"

namespace egpu::simgpu::driver {

// False for an attribute outside the enum.
bool device_attribute(CUdevice_attribute attribute, uint32_t physical, int* value);

}  // namespace egpu::simgpu::driver
