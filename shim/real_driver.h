// The real dynamic linker entry points and the real CUDA driver.
#pragma once

namespace egpu::shim {

using DlsymFn = void* (*)(void*, const char*);

// glibc's dlsym (the shim exports its own): dlvsym(RTLD_NEXT, "dlsym", ...).
DlsymFn real_dlsym();
// The real libcuda.so.1, loaded on first need; null when there is none.
void* libcuda_handle();
// Whether the process has the real driver loaded (never loads it).
bool libcuda_loaded();

}  // namespace egpu::shim
