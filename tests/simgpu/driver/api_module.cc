// Modules, libraries and functions. Any image is accepted and any name is a
// kernel: what a kernel does is given by its first parameter (its duration);
// a name of an NCCL-like kernel makes it a collective (collective_launch.h).
#include "driver/cuda_api.h"
// after cuda.h:
#include <unistd.h>

#include <cstring>
#include <memory>

#include "driver/collective_launch.h"
#include "driver/driver_state.h"
#include "driver/functions.h"
#include "driver/handles.h"

using egpu::simgpu::driver::guarded;
using egpu::simgpu::driver::registry;
using egpu::simgpu::driver::require_init;

namespace egpu::simgpu::driver {

bool launchable(CUfunction f) {
  return registry().contains(f, HandleKind::kFunction) ||
         registry().contains(f, HandleKind::kKernel);
}

LaunchKind launch_kind(CUfunction f) {
  // `collective` is written before the handle is registered and never after.
  if (const CUfunc_st* function = registry().find<CUfunc_st>(f)) {
    return function->collective ? LaunchKind::kCollective : LaunchKind::kKernel;
  }
  if (const CUkern_st* kernel = registry().find<CUkern_st>(f)) {
    return kernel->collective ? LaunchKind::kCollective : LaunchKind::kKernel;
  }
  return LaunchKind::kInvalid;
}

}  // namespace egpu::simgpu::driver

namespace {

CUresult new_module(CUmodule* module, const void* image) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *module = registry().adopt(std::make_unique<CUmod_st>());
  return CUDA_SUCCESS;
}

CUresult new_library(CUlibrary* library, const void* code) {
  if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
  if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *library = registry().adopt(std::make_unique<CUlib_st>());
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return guarded([&] { return new_module(module, image); });
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                            CUjit_option* options, void** optionValues) {
  (void)numOptions;
  (void)options;
  (void)optionValues;
  return guarded([&] { return new_module(module, image); });
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return guarded([&] { return new_module(module, fatCubin); });
}

// The file must exist and be readable; its content is not looked at.
CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  return guarded([&] {
    if (fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (::access(fname, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    return new_module(module, fname);
  });
}

CUresult cuModuleUnload(CUmodule hmod) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUmod_st* mod = registry().find<CUmod_st>(hmod);
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    {
      const std::lock_guard lock(mod->mutex);
      for (const auto& [name, function] : mod->functions)
        registry().destroy(function);
      mod->functions.clear();
    }
    registry().destroy(mod);
    return CUDA_SUCCESS;
  });
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUmod_st* mod = registry().find<CUmod_st>(hmod);
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    const std::lock_guard lock(mod->mutex);
    CUfunc_st*& function = mod->functions[name];
    if (function == nullptr) {
      auto created = std::make_unique<CUfunc_st>();
      created->module = mod;
      created->name = name;
      created->collective = egpu::simgpu::driver::is_collective_kernel_name(name);
      function = registry().adopt(std::move(created));
    }
    *hfunc = function;
    return CUDA_SUCCESS;
  });
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                           void** jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions) {
  (void)jitOptions;
  (void)jitOptionsValues;
  (void)numJitOptions;
  (void)libraryOptions;
  (void)libraryOptionValues;
  (void)numLibraryOptions;
  return guarded([&] { return new_library(library, code); });
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption* libraryOptions, void** libraryOptionValues,
                               unsigned int numLibraryOptions) {
  (void)jitOptions;
  (void)jitOptionsValues;
  (void)numJitOptions;
  (void)libraryOptions;
  (void)libraryOptionValues;
  (void)numLibraryOptions;
  return guarded([&] {
    if (fileName == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (::access(fileName, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    return new_library(library, fileName);
  });
}

CUresult cuLibraryUnload(CUlibrary handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    CUlib_st* lib = registry().find<CUlib_st>(handle);
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    {
      const std::lock_guard lock(lib->mutex);
      for (const auto& [name, kernel] : lib->kernels) {
        if (kernel->function != nullptr) registry().destroy(kernel->function);
        registry().destroy(kernel);
      }
      lib->kernels.clear();
    }
    registry().destroy(lib);
    return CUDA_SUCCESS;
  });
}

CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary handle, const char* name) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (pKernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUlib_st* lib = registry().find<CUlib_st>(handle);
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    const std::lock_guard lock(lib->mutex);
    CUkern_st*& kernel = lib->kernels[name];
    if (kernel == nullptr) {
      auto created = std::make_unique<CUkern_st>();
      created->library = lib;
      created->name = name;
      created->collective = egpu::simgpu::driver::is_collective_kernel_name(name);
      kernel = registry().adopt(std::move(created));
    }
    *pKernel = kernel;
    return CUDA_SUCCESS;
  });
}

CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel handle) {
  return guarded([&] {
    if (const CUresult rc = require_init(); rc != CUDA_SUCCESS) return rc;
    if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUkern_st* kernel = registry().find<CUkern_st>(handle);
    if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    const std::lock_guard lock(kernel->library->mutex);
    if (kernel->function == nullptr) {
      auto created = std::make_unique<CUfunc_st>();
      created->name = kernel->name;
      created->collective = kernel->collective;
      kernel->function = registry().adopt(std::move(created));
    }
    *pFunc = kernel->function;
    return CUDA_SUCCESS;
  });
}

CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  return guarded([&] {
    if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!egpu::simgpu::driver::launchable(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *pi = 1024;
        break;
      case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *pi = 16;
        break;
      case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *pi = 90;
        break;
      case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *pi = 90;
        break;
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *pi = 49152;
        break;
      default:
        *pi = 0;
        break;
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  (void)attrib;
  (void)value;
  return egpu::simgpu::driver::launchable(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  (void)config;
  return egpu::simgpu::driver::launchable(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetName(const char** name, CUfunction hfunc) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* function = registry().find<CUfunc_st>(hfunc);
  if (function == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = function->name.c_str();
  return CUDA_SUCCESS;
}

}  // extern "C"
