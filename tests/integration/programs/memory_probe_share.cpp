// memory-probe's sharing subcommands: one process exports device memory, another
// imports it, the way NCCL, PyTorch's CUDA IPC and pool sharing do.
//   share-export KIND SIZE  allocate SIZE (ipc: cuMemAlloc; vmm: cuMemCreate for a
//                           POSIX fd; pool: an IPC-capable pool), export it and
//                           write "KIND PID FD SIZE HEX" to PROBE_HANDLE_FILE; then
//                           PROBE_MARK, hold until PROBE_HOLD_UNTIL, free, exit
//   share-import KIND       import from PROBE_HANDLE_FILE (the fd through
//                           /proc/PID/fd/FD; ipc: opened twice, closed twice; vmm:
//                           reserve and map all of it), info,
//                           PROBE_MARK, hold until PROBE_HOLD_UNTIL, close/release, info
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "memory_probe.h"

namespace memory_probe {
namespace {

constexpr int kHoldMs = 60000;

struct Shared {
  std::string kind;
  long pid = 0;
  int fd = -1;
  size_t size = 0;
  std::string hex = "-";  // an IPC handle or pool pointer export data
};

std::string to_hex(const void* data, size_t n) {
  std::string out;
  char byte[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", static_cast<const unsigned char*>(data)[i]);
    out += byte;
  }
  return out;
}

void from_hex(const std::string& hex, void* out, size_t n) {
  if (hex.size() != 2 * n) check(CUDA_ERROR_INVALID_VALUE, "handle file (hex)");
  for (size_t i = 0; i < n; ++i) {
    static_cast<unsigned char*>(out)[i] =
        static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
}

const char* handle_file() {
  const char* path = std::getenv("PROBE_HANDLE_FILE");
  if (path == nullptr) check(CUDA_ERROR_INVALID_VALUE, "PROBE_HANDLE_FILE");
  return path;
}

// Written whole, then renamed: the importer never reads half a line.
void publish(const Shared& s) {
  const std::string path = handle_file(), tmp = path + ".tmp";
  std::ofstream(tmp) << s.kind << ' ' << s.pid << ' ' << s.fd << ' ' << s.size << ' ' << s.hex
                     << '\n';
  std::filesystem::rename(tmp, path);
}

Shared read_shared() {
  Shared s;
  std::ifstream in(handle_file());
  if (!(in >> s.kind >> s.pid >> s.fd >> s.size >> s.hex)) {
    check(CUDA_ERROR_INVALID_VALUE, "handle file");
  }
  return s;
}

// The exporter's descriptor, received as a process may: through /proc.
void* exporter_fd(const Shared& s) {
  const std::string path = "/proc/" + std::to_string(s.pid) + "/fd/" + std::to_string(s.fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) check(CUDA_ERROR_INVALID_HANDLE, "open the exporter's fd");
  return reinterpret_cast<void*>(static_cast<intptr_t>(fd));
}

CUmemAllocationProp shareable_prop(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

size_t range_size(CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  return cuMemGetAddressRange(&base, &size, p) == CUDA_SUCCESS ? size : 0;
}

}  // namespace

json share_export(CUdevice dev, const std::string& kind, size_t size) {
  json out;
  Shared s{kind, static_cast<long>(::getpid()), -1, size, "-"};
  CUdeviceptr p = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemoryPool pool = nullptr;
  if (kind == "ipc") {
    check(cuMemAlloc(&p, size), "cuMemAlloc");
    CUipcMemHandle ipc{};
    check(cuIpcGetMemHandle(&ipc, p), "cuIpcGetMemHandle");
    s.hex = to_hex(ipc.reserved, sizeof ipc.reserved);
  } else if (kind == "vmm") {
    const CUmemAllocationProp prop = shareable_prop(dev);
    check(cuMemCreate(&handle, size, &prop, 0), "cuMemCreate");
    check(cuMemExportToShareableHandle(&s.fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "cuMemExportToShareableHandle");
  } else if (kind == "pool") {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    check(cuMemPoolCreate(&pool, &props), "cuMemPoolCreate");
    check(
        cuMemPoolExportToShareableHandle(&s.fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemPoolExportToShareableHandle");
    check(cuMemAllocFromPoolAsync(&p, size, pool, nullptr), "cuMemAllocFromPoolAsync");
    check(cuStreamSynchronize(nullptr), "cuStreamSynchronize");
    CUmemPoolPtrExportData data{};
    check(cuMemPoolExportPointer(&data, p), "cuMemPoolExportPointer");
    s.hex = to_hex(data.reserved, sizeof data.reserved);
  } else {
    check(CUDA_ERROR_INVALID_VALUE, "share-export KIND");
  }
  publish(s);
  out["exported"] = info();
  mark();
  hold(kHoldMs);
  if (kind == "ipc") {
    out["free"] = name_of(cuMemFree(p));
  } else if (kind == "vmm") {
    out["free"] = name_of(cuMemRelease(handle));
  } else {
    out["free"] = name_of(cuMemFreeAsync(p, nullptr));
    cuStreamSynchronize(nullptr);
    cuMemPoolDestroy(pool);
  }
  if (s.fd >= 0) ::close(s.fd);
  out["freed"] = info();
  return out;
}

json share_import(CUdevice dev, const std::string& kind) {
  json out;
  const Shared s = read_shared();
  CUdeviceptr p = 0;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (kind == "ipc") {
    CUipcMemHandle ipc{};
    from_hex(s.hex, ipc.reserved, sizeof ipc.reserved);
    r = cuIpcOpenMemHandle(&p, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    out["size"] = range_size(p);
    if (r == CUDA_SUCCESS) {
      // Opened again by this context: the same pointer, one more reference.
      CUdeviceptr again = 0;
      const CUresult a = cuIpcOpenMemHandle(&again, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      out["reopened"] = name_of(a);
      out["reopened_same"] = again == p;
    }
  } else if (kind == "vmm") {
    r = cuMemImportFromShareableHandle(&handle, exporter_fd(s),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r == CUDA_SUCCESS) {
      // What is mapped from an imported handle is what it holds here.
      check(cuMemAddressReserve(&va, s.size, 0, 0, 0), "cuMemAddressReserve");
      const CUresult m = cuMemMap(va, s.size, 0, handle, 0);
      out["mapped"] = name_of(m);
      if (m == CUDA_SUCCESS) {
        CUmemAccessDesc access{};
        access.location = shareable_prop(dev).location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        check(cuMemSetAccess(va, s.size, &access, 1), "cuMemSetAccess");
      } else {
        check(cuMemAddressFree(va, s.size), "cuMemAddressFree");
        va = 0;
      }
    }
  } else if (kind == "pool") {
    CUmemoryPool pool = nullptr;
    r = cuMemPoolImportFromShareableHandle(&pool, exporter_fd(s),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r == CUDA_SUCCESS) {
      CUmemPoolPtrExportData data{};
      from_hex(s.hex, data.reserved, sizeof data.reserved);
      r = cuMemPoolImportPointer(&p, pool, &data);
      out["size"] = range_size(p);
    }
  }
  out["imported"] = name_of(r);
  out["held"] = info();
  mark();
  hold(kHoldMs);
  if (r == CUDA_SUCCESS) {
    if (kind == "ipc") {
      out["close_first"] = name_of(cuIpcCloseMemHandle(p));
      out["after_first_close"] = info();
      out["release"] = name_of(cuIpcCloseMemHandle(p));
    } else if (kind == "vmm") {
      if (va != 0) check(cuMemUnmap(va, s.size), "cuMemUnmap");
      out["release"] = name_of(cuMemRelease(handle));
      if (va != 0) check(cuMemAddressFree(va, s.size), "cuMemAddressFree");
    } else {
      out["release"] = name_of(cuMemFree(p));
    }
  }
  out["released"] = info();
  return out;
}

}  // namespace memory_probe
