// What may be launched: a CUfunction from a module, or a CUkernel from a
// library (CUDA accepts a CUkernel cast to CUfunction).
#pragma once

#include "driver/cuda_api.h"

namespace egpu::simgpu::driver {

bool launchable(CUfunction f);

enum class LaunchKind { kInvalid, kKernel, kCollective };

// How `f` launches: not at all (not a live function or kernel), as a plain
// kernel, or as a collective (its name says so; collective_launch.h).
LaunchKind launch_kind(CUfunction f);

// Queues one launch of `f` on `stream` (api_launch.cc): what every launch
// entry point comes down to once its arguments are taken apart.
CUresult launch_function(CUfunction f, CUstream stream, void** params, void** extra,
                         bool per_thread_default);

}  // namespace egpu::simgpu::driver
