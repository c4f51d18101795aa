// The table behind cuGetProcAddress: (name, first CUDA version, variant) ->
// function, one row per ABI version of every entry point simgpu implements.
#pragma once

#include "driver/cuda_api.h"

namespace egpu::simgpu::driver {

enum class ProcVariant { kDefault, kPerThread };

struct ProcEntry {
  const char* name;  // as asked for: "cuLaunchKernel"
  int version;       // first CUDA version with this ABI (4000, 7000, ...)
  ProcVariant variant;
  void* function;
};

struct ProcLookup {
  CUdriverProcAddressQueryResult status;
  void* function;
};

// The newest row of `name` not newer than `cuda_version`; with per_thread, a
// _ptsz/_ptds row is preferred and the default one used where there is none.
ProcLookup find_proc_address(const char* name, int cuda_version, bool per_thread);

// All rows (for tests).
const ProcEntry* proc_entries(size_t* count);

}  // namespace egpu::simgpu::driver
