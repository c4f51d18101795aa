// sim_share MODE ARGS: the importing process of simgpu's sharing tests. It
// imports what the parent test exported, reports on stdout, and takes each
// next step when the parent writes a line to stdin.
//   ipc HANDLE_HEX       open twice (the same pointer), "opened <rc> <size> <same>";
//                        then close both, "closed <rc>"
//   vmm FD               import, reserve and map it, "mapped <rc> <size>";
//                        then unmap and release, "released <rc>"
//   pool POOL_FD DATA_HEX  import the pool and the pointer, "imported <rc> <size>";
//                        then cuMemFree it, "freed <rc>"
// Ends by waiting for stdin to close ("hold" after the last step).
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check.h"

namespace {

void wait_for_cue() {
  char line[64];
  if (std::fgets(line, sizeof line, stdin) == nullptr) std::exit(0);
}

void report(const char* what, CUresult rc, uint64_t a = 0, uint64_t b = 0) {
  std::printf("%s %d %llu %llu\n", what, static_cast<int>(rc), static_cast<unsigned long long>(a),
              static_cast<unsigned long long>(b));
  std::fflush(stdout);
}

bool from_hex(const char* hex, unsigned char* out, size_t n) {
  if (std::strlen(hex) != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned int byte = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &byte) != 1) return false;
    out[i] = static_cast<unsigned char>(byte);
  }
  return true;
}

size_t range_size(CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  return cuMemGetAddressRange(&base, &size, p) == CUDA_SUCCESS && base == p ? size : 0;
}

void ipc(const char* hex) {
  CUipcMemHandle handle{};
  if (!from_hex(hex, reinterpret_cast<unsigned char*>(handle.reserved), sizeof handle.reserved)) {
    std::exit(2);
  }
  CUdeviceptr first = 0;
  CUdeviceptr second = 0;
  CUresult rc = cuIpcOpenMemHandle(&first, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (rc == CUDA_SUCCESS)
    rc = cuIpcOpenMemHandle(&second, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  report("opened", rc, range_size(first), first == second);
  wait_for_cue();
  rc = cuIpcCloseMemHandle(first);
  if (rc == CUDA_SUCCESS) rc = cuIpcCloseMemHandle(second);
  const CUresult third = cuIpcCloseMemHandle(first);  // no reference left
  report("closed",
         rc == CUDA_SUCCESS && third == CUDA_ERROR_INVALID_VALUE ? rc : CUDA_ERROR_UNKNOWN);
}

void vmm(int fd) {
  CUmemGenericAllocationHandle handle = 0;
  CUresult rc = cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(intptr_t{fd}),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUmemAllocationProp prop{};
  if (rc == CUDA_SUCCESS) rc = cuMemGetAllocationPropertiesFromHandle(&prop, handle);
  size_t granularity = 0;
  if (rc == CUDA_SUCCESS) {
    rc = cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  }
  CUdeviceptr va = 0;
  const size_t size = 2 * granularity;  // what the parent test exports
  if (rc == CUDA_SUCCESS) rc = cuMemAddressReserve(&va, size, 0, 0, 0);
  if (rc == CUDA_SUCCESS) rc = cuMemMap(va, size, 0, handle, 0);
  report("mapped", rc, size);
  wait_for_cue();
  rc = cuMemUnmap(va, size);
  if (rc == CUDA_SUCCESS) rc = cuMemRelease(handle);
  if (rc == CUDA_SUCCESS) rc = cuMemAddressFree(va, size);
  report("released", rc);
}

void pool(int fd, const char* hex) {
  CUmemPoolPtrExportData data{};
  if (!from_hex(hex, data.reserved, sizeof data.reserved)) std::exit(2);
  CUmemoryPool imported = nullptr;
  CUresult rc = cuMemPoolImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t{fd}),
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  CUdeviceptr p = 0;
  if (rc == CUDA_SUCCESS) rc = cuMemPoolImportPointer(&p, imported, &data);
  report("imported", rc, range_size(p));
  wait_for_cue();
  report("freed", cuMemFree(p));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  SIMGPU_CHECK(cuInit(0));
  CUdevice dev = 0;
  SIMGPU_CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  SIMGPU_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
  const std::string mode = argv[1];
  if (mode == "ipc") {
    ipc(argv[2]);
  } else if (mode == "vmm") {
    vmm(std::atoi(argv[2]));
  } else if (mode == "pool" && argc >= 4) {
    pool(std::atoi(argv[2]), argv[3]);
  } else {
    return 2;
  }
  wait_for_cue();
  return 0;
}
