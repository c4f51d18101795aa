#include "shim/real_driver.h"

#include <dlfcn.h>

#include <atomic>

#include "shim/log.h"
#include "shim/real_functions.h"

namespace egpu::shim {
namespace {

constinit std::atomic<DlsymFn> g_real_dlsym{nullptr};
constinit std::atomic<void*> g_libcuda{nullptr};

#define EGPU_AS_NAME(name) #name,
constexpr const char* kNames[] = {EGPU_WRAPPED_FUNCTIONS(EGPU_AS_NAME)
                                      EGPU_HELPER_FUNCTIONS(EGPU_AS_NAME)};
#undef EGPU_AS_NAME
static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(RealId::kCount));

}  // namespace

DlsymFn real_dlsym() {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  // Several threads may race here: they all find the same function.
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"}) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (fn != nullptr) break;
  }
  if (fn != nullptr) g_real_dlsym.store(fn, std::memory_order_release);
  return fn;
}

void* libcuda_handle() {
  void* handle = g_libcuda.load(std::memory_order_acquire);
  if (handle != nullptr) return handle;
  handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen("libcuda.so.1", RTLD_NOW);
  if (handle == nullptr) {
    EGPU_SHIM_LOG_ONCE("cannot load the CUDA driver libcuda.so.1: %s", dlerror());
    return nullptr;
  }
  void* expected = nullptr;
  if (!g_libcuda.compare_exchange_strong(expected, handle, std::memory_order_acq_rel)) {
    dlclose(handle);  // another thread won; drop our extra reference
    handle = expected;
  }
  return handle;
}

bool libcuda_loaded() {
  if (g_libcuda.load(std::memory_order_acquire) != nullptr) return true;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

const char* real_name(RealId id) {
  return kNames[static_cast<int>(id)];
}

constinit std::atomic<void*> detail::g_real[static_cast<int>(RealId::kCount)] = {};

void* detail::resolve_real(RealId id) {
  std::atomic<void*>& slot = g_real[static_cast<int>(id)];
  void* fn = slot.load(std::memory_order_acquire);
  if (fn != nullptr) return fn == kMissingReal ? nullptr : fn;
  void* handle = libcuda_handle();
  DlsymFn lookup = real_dlsym();
  if (handle == nullptr || lookup == nullptr) return nullptr;
  fn = lookup(handle, real_name(id));
  slot.store(fn != nullptr ? fn : kMissingReal, std::memory_order_release);
  if (fn == nullptr) log_debug("the driver has no %s", real_name(id));
  return fn;
}

CUresult missing_real_result() {
  return libcuda_handle() != nullptr ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

}  // namespace egpu::shim
