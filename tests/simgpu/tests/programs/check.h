// Error checking for simgpu's small test programs: print the failing call and
// exit with status 3.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define SIMGPU_CHECK(call)                                                          \
  do {                                                                              \
    const CUresult simgpu_check_rc = (call);                                        \
    if (simgpu_check_rc != CUDA_SUCCESS) {                                          \
      const char* simgpu_check_name = nullptr;                                      \
      cuGetErrorName(simgpu_check_rc, &simgpu_check_name);                          \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call,          \
                   simgpu_check_name != nullptr ? simgpu_check_name : "(unknown)"); \
      std::exit(3);                                                                 \
    }                                                                               \
  } while (0)

// Any image works on simgpu; this one is plausible PTX.
inline constexpr char kSimgpuTestPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin(.param .u64 ns) { ret; }\n";
