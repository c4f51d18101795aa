// Context limits that the driver backs with device memory: the malloc heap
// (CU_LIMIT_MALLOC_HEAP_SIZE), the printf FIFO (CU_LIMIT_PRINTF_FIFO_SIZE) and
// the per-thread stack (CU_LIMIT_STACK_SIZE, allocated for every thread the
// device can hold). cuCtxSetLimit accounts what a context raises them by over
// the driver's own values; the bytes come back when lowered or when the
// context goes (cuCtxDestroy, the primary's reset or last release).
#pragma once

#include "shim/cuda_api.h"

namespace egpu::shim {

// `ctx` was destroyed.
void release_context_limits(CUcontext ctx) noexcept;
// The primary context of `ordinal` was reset, or released and maybe destroyed
// (checked with the driver).
void release_primary_limits(int ordinal, bool reset) noexcept;

}  // namespace egpu::shim
