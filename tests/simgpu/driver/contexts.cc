#include "driver/contexts.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/graph_memory.h"
#include "driver/pool_cache.h"
#include "model/timeline.h"

namespace egpu::simgpu::driver {
namespace {

thread_local std::vector<CUctx_st*> t_context_stack;

struct PrimaryContext {
  CUctx_st* ctx = nullptr;
  unsigned int flags = 0;
  int refcount = 0;
  bool held_internally = false;  // retained by context_for_device
};

// Live contexts of this process, for the exit hook and lookups by device.
struct ProcessContexts {
  std::mutex mutex;
  std::vector<CUctx_st*> live;
  std::vector<PrimaryContext> primaries;  // by ordinal
};

ProcessContexts& process_contexts() {
  static auto* instance = new ProcessContexts();  // never destroyed: used at exit
  return *instance;
}

PrimaryContext& primary_of(ProcessContexts& pc, int ordinal) {
  if (pc.primaries.size() <= static_cast<size_t>(ordinal)) {
    pc.primaries.resize(static_cast<size_t>(ordinal) + 1);
  }
  return pc.primaries[static_cast<size_t>(ordinal)];
}

bool is_live(CUctx_st* ctx) {
  return registry().find<CUctx_st>(ctx) != nullptr;
}

void default_limits(CUctx_st* ctx) {
  ctx->limits[CU_LIMIT_STACK_SIZE] = 1024;
  ctx->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
  ctx->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
  ctx->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
  ctx->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
  ctx->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32;
  ctx->limits[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0;
}

// Releases a primary context's slot when nobody holds it any more.
CUresult drop_primary(PrimaryContext& primary) {
  CUctx_st* ctx = primary.ctx;
  primary.ctx = nullptr;
  primary.refcount = 0;
  primary.held_internally = false;
  return ctx != nullptr ? destroy_context(ctx) : CUDA_SUCCESS;
}

// Process exit: retire this process's contexts (dropping queued work, like
// the teardown of a real context) so that others stop waiting for it at once.
__attribute__((destructor)) void retire_contexts_at_exit() {
  Driver& driver = Driver::get();
  if (!driver.ready() || driver.pid() != static_cast<int32_t>(::getpid())) return;
  ProcessContexts& pc = process_contexts();
  const std::lock_guard lock(pc.mutex);
  for (CUctx_st* ctx : pc.live) {
    DeviceShared& dev = driver.device(ctx->physical);
    const DeviceLock device_lock(dev, /*timeout_ns=*/1'000'000'000);
    if (!device_lock.held()) continue;  // a liveness sweep will retire it later
    bring_to_now(dev, monotonic_ns(), driver.board());
    if (context_matches(dev.timeline, ctx->slot, ctx->generation)) {
      retire_and_free(dev, ctx->slot, dev.timeline.now_ns);
    }
  }
  pc.live.clear();
}

}  // namespace

CUresult create_context(int ordinal, unsigned int flags, bool primary, CUctx_st** out) {
  Driver& driver = Driver::get();
  auto ctx = std::make_unique<CUctx_st>();
  ctx->id = driver.next_id();
  ctx->ordinal = ordinal;
  ctx->physical = driver.physical_of(ordinal);
  ctx->primary = primary;
  ctx->flags = flags;
  default_limits(ctx.get());
  int slot = -1;
  const CUresult rc = with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t now) {
    slot = claim_context(dev.timeline, driver.self(), driver.label(), now);
    if (slot < 0) {  // all taken: maybe some owners died since the last sweep
      sweep_dead_contexts(dev, now);
      slot = claim_context(dev.timeline, driver.self(), driver.label(), now);
    }
    if (slot < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->slot = static_cast<uint32_t>(slot);
    ctx->generation = dev.timeline.contexts[slot].generation;
    return CUDA_SUCCESS;
  });
  if (rc != CUDA_SUCCESS) return rc;
  auto legacy = std::make_unique<CUstream_st>();
  legacy->ctx = ctx.get();
  legacy->legacy = true;
  legacy->tag = 0;
  ctx->legacy_stream = std::move(legacy);
  CUctx_st* raw = registry().adopt(std::move(ctx));
  ProcessContexts& pc = process_contexts();
  const std::lock_guard lock(pc.mutex);
  pc.live.push_back(raw);
  *out = raw;
  return CUDA_SUCCESS;
}

CUresult destroy_context(CUctx_st* ctx) {
  wait_for_seq(ctx, ctx->last_seq.load());
  with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t now) {
    if (context_matches(dev.timeline, ctx->slot, ctx->generation)) {
      retire_and_free(dev, ctx->slot, now);
    }
    return CUDA_SUCCESS;
  });
  forget_graph_memory(ctx);
  forget_pool_memory(ctx);
  {
    ProcessContexts& pc = process_contexts();
    const std::lock_guard lock(pc.mutex);
    std::erase(pc.live, ctx);
  }
  std::erase(t_context_stack, ctx);
  registry().destroy_owned_by(ctx);
  registry().destroy(ctx);
  return CUDA_SUCCESS;
}

CUctx_st* current_context() {
  if (t_context_stack.empty()) return nullptr;
  CUctx_st* ctx = t_context_stack.back();
  return is_live(ctx) ? ctx : nullptr;
}

CUresult require_current(CUctx_st** out) {
  *out = current_context();
  return *out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

void push_current(CUctx_st* ctx) {
  t_context_stack.push_back(ctx);
}

CUctx_st* pop_current() {
  if (t_context_stack.empty()) return nullptr;
  CUctx_st* top = t_context_stack.back();
  t_context_stack.pop_back();
  return top;
}

void set_current(CUctx_st* ctx) {
  if (ctx == nullptr) {
    pop_current();
  } else if (t_context_stack.empty()) {
    t_context_stack.push_back(ctx);
  } else {
    t_context_stack.back() = ctx;
  }
}

CUresult primary_retain(int ordinal, CUctx_st** out) {
  ProcessContexts& pc = process_contexts();
  std::unique_lock lock(pc.mutex);
  PrimaryContext& primary = primary_of(pc, ordinal);
  if (primary.ctx == nullptr || !is_live(primary.ctx)) {
    const unsigned int flags = primary.flags;
    lock.unlock();  // create_context takes pc.mutex itself
    CUctx_st* ctx = nullptr;
    const CUresult rc = create_context(ordinal, flags, true, &ctx);
    if (rc != CUDA_SUCCESS) return rc;
    lock.lock();
    PrimaryContext& again = primary_of(pc, ordinal);
    if (again.ctx != nullptr && is_live(again.ctx)) {  // another thread won the race
      lock.unlock();
      destroy_context(ctx);
      lock.lock();
    } else {
      again.ctx = ctx;
      again.refcount = 0;
    }
  }
  PrimaryContext& held = primary_of(pc, ordinal);
  ++held.refcount;
  *out = held.ctx;
  return CUDA_SUCCESS;
}

CUresult primary_release(int ordinal) {
  ProcessContexts& pc = process_contexts();
  std::unique_lock lock(pc.mutex);
  PrimaryContext& primary = primary_of(pc, ordinal);
  if (primary.ctx == nullptr || primary.refcount <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--primary.refcount > 0 || primary.held_internally) return CUDA_SUCCESS;
  PrimaryContext doomed = primary;
  primary = PrimaryContext{nullptr, primary.flags, 0, false};
  lock.unlock();
  return drop_primary(doomed);
}

CUresult primary_reset(int ordinal) {
  ProcessContexts& pc = process_contexts();
  std::unique_lock lock(pc.mutex);
  PrimaryContext& primary = primary_of(pc, ordinal);
  PrimaryContext doomed = primary;
  primary = PrimaryContext{nullptr, primary.flags, 0, false};
  lock.unlock();
  return drop_primary(doomed);
}

void primary_state(int ordinal, unsigned int* flags, int* active) {
  ProcessContexts& pc = process_contexts();
  const std::lock_guard lock(pc.mutex);
  const PrimaryContext& primary = primary_of(pc, ordinal);
  if (flags != nullptr) *flags = primary.flags;
  if (active != nullptr) *active = primary.ctx != nullptr && is_live(primary.ctx) ? 1 : 0;
}

void primary_set_flags(int ordinal, unsigned int flags) {
  ProcessContexts& pc = process_contexts();
  const std::lock_guard lock(pc.mutex);
  primary_of(pc, ordinal).flags = flags;
}

CUresult context_for_device(int ordinal, CUctx_st** out) {
  if (CUctx_st* current = current_context(); current != nullptr && current->ordinal == ordinal) {
    *out = current;
    return CUDA_SUCCESS;
  }
  ProcessContexts& pc = process_contexts();
  {
    const std::lock_guard lock(pc.mutex);
    for (CUctx_st* ctx : pc.live) {
      if (ctx->ordinal == ordinal) {
        *out = ctx;
        return CUDA_SUCCESS;
      }
    }
  }
  const CUresult rc = primary_retain(ordinal, out);
  if (rc != CUDA_SUCCESS) return rc;
  const std::lock_guard lock(pc.mutex);
  PrimaryContext& primary = primary_of(pc, ordinal);
  --primary.refcount;  // an internal hold is a flag, not a user reference
  primary.held_internally = true;
  return CUDA_SUCCESS;
}

CUctx_st* find_context(uint32_t physical, uint32_t slot, uint32_t generation) {
  ProcessContexts& pc = process_contexts();
  const std::lock_guard lock(pc.mutex);
  for (CUctx_st* ctx : pc.live) {
    if (ctx->physical == physical && ctx->slot == slot && ctx->generation == generation) {
      return ctx;
    }
  }
  return nullptr;
}

bool allocate_event_slot(CUctx_st* ctx, uint32_t* slot) {
  const std::lock_guard lock(ctx->mutex);
  if (!ctx->free_event_slots.empty()) {
    *slot = ctx->free_event_slots.back();
    ctx->free_event_slots.pop_back();
    return true;
  }
  if (ctx->next_event_slot >= kEventSlots) return false;
  *slot = ctx->next_event_slot++;
  return true;
}

void release_event_slot(CUctx_st* ctx, uint32_t slot) {
  const std::lock_guard lock(ctx->mutex);
  ctx->free_event_slots.push_back(slot);
}

}  // namespace egpu::simgpu::driver
