// Contexts, the current-context stack and primary contexts.
#include "driver/cuda_api.h"
// after cuda.h:
#include "driver/contexts.h"
#include "driver/device_session.h"
#include "driver/driver_state.h"
#include "driver/memory_accounting.h"
#include "driver/pool_cache.h"

using egpu::simgpu::driver::Driver;
using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;
using egpu::simgpu::driver::valid_device;
namespace drv = egpu::simgpu::driver;

namespace {

CUresult create_and_push(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::create_context(dev, flags, false, &ctx); rc != CUDA_SUCCESS) {
    return rc;
  }
  drv::push_current(ctx);
  *pctx = ctx;
  return CUDA_SUCCESS;
}

// The context argument, or the current one when it is null.
CUresult context_or_current(CUcontext handle, CUctx_st** out) {
  if (handle == nullptr) return drv::require_current(out);
  *out = registry().find<CUctx_st>(handle);
  return *out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult synchronize(CUcontext handle) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = context_or_current(handle, &ctx); rc != CUDA_SUCCESS) return rc;
  return drv::wait_for_seq(ctx, ctx->last_seq.load());
}

CUresult primary_release(CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return drv::primary_release(dev);
}

CUresult primary_reset(CUdevice dev) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return drv::primary_reset(dev);
}

CUresult primary_set_flags(CUdevice dev, unsigned int flags) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  drv::primary_set_flags(dev, flags);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                        CUdevice dev) {
  (void)params;  // execution affinity and CIG: nothing to simulate
  return guarded([&] { return create_and_push(pctx, flags, dev); });
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                        unsigned int flags, CUdevice dev) {
  (void)paramsArray;
  (void)numParams;
  return guarded([&] { return create_and_push(pctx, flags, dev); });
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return guarded([&] { return create_and_push(pctx, flags, dev); });
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return guarded([&] { return create_and_push(pctx, flags, dev); });
}

CUresult cuCtxDestroy_v2(CUcontext handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUctx_st* ctx = registry().find<CUctx_st>(handle);
    if (ctx == nullptr || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
    return drv::destroy_context(ctx);
  });
}

CUresult cuCtxDestroy(CUcontext ctx) {
  return cuCtxDestroy_v2(ctx);
}

CUresult cuCtxPushCurrent_v2(CUcontext handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUctx_st* ctx = registry().find<CUctx_st>(handle);
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    drv::push_current(ctx);
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  return cuCtxPushCurrent_v2(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUctx_st* top = drv::pop_current();
    if (top == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx != nullptr) *pctx = top;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxPopCurrent(CUcontext* pctx) {
  return cuCtxPopCurrent_v2(pctx);
}

CUresult cuCtxSetCurrent(CUcontext handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUctx_st* ctx = nullptr;
    if (handle != nullptr) {
      ctx = registry().find<CUctx_st>(handle);
      if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    }
    drv::set_current(ctx);
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = drv::current_context();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext handle) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = context_or_current(handle, &ctx); rc != CUDA_SUCCESS) return rc;
  *device = ctx->ordinal;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  return cuCtxGetDevice_v2(device, nullptr);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  return guarded([&] {
    const CUresult rc = synchronize(ctx);
    drv::release_pool_excess();  // pools give back what is above their thresholds
    return rc;
  });
}

CUresult cuCtxSynchronize(void) {
  return guarded([&] {
    const CUresult rc = synchronize(nullptr);
    drv::release_pool_excess();  // pools give back what is above their thresholds
    return rc;
  });
}

CUresult cuCtxGetFlags(unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  *flags = ctx->flags;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetFlags(unsigned int flags) {
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  ctx->flags = flags;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext handle, unsigned long long* ctxId) {
  if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = context_or_current(handle, &ctx); rc != CUDA_SUCCESS) return rc;
  *ctxId = ctx->id;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext handle, unsigned int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = context_or_current(handle, &ctx); rc != CUDA_SUCCESS) return rc;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  return guarded([&] {
    if (pvalue == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = nullptr;
    if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
    const std::lock_guard lock(ctx->mutex);
    const auto it = ctx->limits.find(limit);
    if (it == ctx->limits.end()) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *pvalue = it->second;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  return guarded([&] {
    CUctx_st* ctx = nullptr;
    if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
    const std::lock_guard lock(ctx->mutex);
    const auto it = ctx->limits.find(limit);
    if (it == ctx->limits.end()) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (const CUresult rc = drv::charge_limit(ctx, limit, value); rc != CUDA_SUCCESS) return rc;
    it->second = value;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxGetCacheConfig(CUfunc_cache* pconfig) {
  if (pconfig == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  *pconfig = ctx->cache_config;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config) {
  CUctx_st* ctx = nullptr;
  if (const CUresult rc = drv::require_current(&ctx); rc != CUDA_SUCCESS) return rc;
  ctx->cache_config = config;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    CUctx_st* ctx = nullptr;
    const CUresult rc = drv::primary_retain(dev, &ctx);
    if (rc == CUDA_SUCCESS) *pctx = ctx;
    return rc;
  });
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return guarded([&] { return primary_release(dev); });
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return guarded([&] { return primary_release(dev); });
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return guarded([&] { return primary_reset(dev); });
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return guarded([&] { return primary_reset(dev); });
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    drv::primary_state(dev, flags, active);
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  return guarded([&] { return primary_set_flags(dev, flags); });
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return guarded([&] { return primary_set_flags(dev, flags); });
}

}  // extern "C"
