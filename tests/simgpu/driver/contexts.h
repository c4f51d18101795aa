// Contexts as a process sees them: creation claims a slot in the device's
// shared context table; destruction retires it and frees its memory. Each
// thread has a stack of current contexts; each device has a primary context
// with a reference count.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "driver/handles.h"

namespace egpu::simgpu::driver {

CUresult create_context(int ordinal, unsigned int flags, bool primary, CUctx_st** out);

// Waits for the context's queued work, retires its slot (freeing its memory)
// and destroys it with everything it owns.
CUresult destroy_context(CUctx_st* ctx);

// The calling thread's current context if it is still alive, else nullptr.
CUctx_st* current_context();
// As current_context, but CUDA_ERROR_INVALID_CONTEXT when there is none.
CUresult require_current(CUctx_st** out);

void push_current(CUctx_st* ctx);
CUctx_st* pop_current();  // nullptr if the stack is empty
void set_current(CUctx_st* ctx);

CUresult primary_retain(int ordinal, CUctx_st** out);
CUresult primary_release(int ordinal);
CUresult primary_reset(int ordinal);
void primary_state(int ordinal, unsigned int* flags, int* active);
void primary_set_flags(int ordinal, unsigned int flags);

// A context of this process on device `ordinal` to own context-less
// allocations (cuMemCreate, pools): the current one if it is on that device,
// else the primary (retained internally if need be).
CUresult context_for_device(int ordinal, CUctx_st** out);

// This process's live context in `slot` of device `physical`, or nullptr.
CUctx_st* find_context(uint32_t physical, uint32_t slot, uint32_t generation);

// Event timestamp slots of a context's shared queue.
bool allocate_event_slot(CUctx_st* ctx, uint32_t* slot);
void release_event_slot(CUctx_st* ctx, uint32_t slot);

}  // namespace egpu::simgpu::driver
