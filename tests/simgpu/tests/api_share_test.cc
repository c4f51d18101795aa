// Sharing device memory between processes (IPC handles, VMM shareable fds,
// pool pointers): this test process exports, the sim_share program imports.
// Device memory is charged once and lives until the last reference, the
// exporter's or an importer's, is gone.
#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api_fixture.h"

extern char** environ;

namespace egpu::simgpu::testing {
namespace {

constexpr int kSharedFd = 3;  // where the child finds an fd handed to it

std::string hex(const void* data, size_t n) {
  std::string out;
  char byte[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", static_cast<const unsigned char*>(data)[i]);
    out += byte;
  }
  return out;
}

// sim_share in a child process, talking over its stdin/stdout; an fd handed
// over is inherited as fd 3, like any descriptor passed to a child.
class Importer {
 public:
  Importer(std::vector<std::string> args, int fd = -1) {
    int to_child[2];
    int from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) return;
    const std::string program = std::string(SIMGPU_TEST_PROGRAM_DIR) + "/sim_share";
    std::vector<std::string> env_strings{std::string("LD_LIBRARY_PATH=") + SIMGPU_TEST_LIB_DIR};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "LD_LIBRARY_PATH=", 16) != 0) env_strings.emplace_back(*e);
    }
    args.insert(args.begin(), program);
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : env_strings)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      if (fd >= 0 && fd != kSharedFd) ::dup2(fd, kSharedFd);  // dup2 clears close-on-exec
      if (fd == kSharedFd) ::fcntl(kSharedFd, F_SETFD, 0);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = ::fdopen(to_child[1], "w");
    out_ = ::fdopen(from_child[0], "r");
  }
  ~Importer() {
    if (in_ != nullptr) std::fclose(in_);
    if (out_ != nullptr) std::fclose(out_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  Importer(const Importer&) = delete;
  Importer& operator=(const Importer&) = delete;

  // The child's next report: "<what> <rc> <a> <b>"; rc -1 if it ended.
  struct Report {
    std::string what;
    int rc = -1;
    unsigned long long a = 0;
    unsigned long long b = 0;
  };
  Report next() {
    Report r;
    char line[256];
    char what[64];
    if (out_ != nullptr && std::fgets(line, sizeof line, out_) != nullptr &&
        std::sscanf(line, "%63s %d %llu %llu", what, &r.rc, &r.a, &r.b) == 4) {
      r.what = what;
    }
    return r;
  }
  void cue() {
    std::fputs("next\n", in_);
    std::fflush(in_);
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

class ApiShareTest : public ApiTest {};

TEST_F(ApiShareTest, IpcImportKeepsMemoryAliveUntilClosed) {
  const size_t before = free_memory();
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 64 * kMiB), CUDA_SUCCESS);
  CUipcMemHandle handle{};
  ASSERT_EQ(cuIpcGetMemHandle(&handle, p), CUDA_SUCCESS);
  EXPECT_EQ(cuIpcGetMemHandle(&handle, p + 512), CUDA_ERROR_INVALID_VALUE);  // base pointers only
  // A process cannot open its own handle.
  CUdeviceptr own = 0;
  EXPECT_EQ(cuIpcOpenMemHandle(&own, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);

  Importer child({"ipc", hex(handle.reserved, sizeof handle.reserved)});
  const auto opened = child.next();
  ASSERT_EQ(opened.what, "opened");
  EXPECT_EQ(opened.rc, CUDA_SUCCESS);
  EXPECT_EQ(opened.a, 64 * kMiB);                // cuMemGetAddressRange of the import
  EXPECT_EQ(opened.b, 1u);                       // opened twice: the same pointer
  EXPECT_EQ(free_memory(), before - 64 * kMiB);  // not charged twice
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before - 64 * kMiB);  // the importer keeps it alive
  child.cue();
  const auto closed = child.next();
  EXPECT_EQ(closed.what, "closed");
  EXPECT_EQ(closed.rc, CUDA_SUCCESS);  // two closes, a third refused
  EXPECT_EQ(free_memory(), before);
}

TEST_F(ApiShareTest, DeadImporterReleasesWhatItKeptAlive) {
  const size_t before = free_memory();
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 32 * kMiB), CUDA_SUCCESS);
  CUipcMemHandle handle{};
  ASSERT_EQ(cuIpcGetMemHandle(&handle, p), CUDA_SUCCESS);
  Importer child({"ipc", hex(handle.reserved, sizeof handle.reserved)});
  ASSERT_EQ(child.next().rc, CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before - 32 * kMiB);
  child.kill();
  EXPECT_EQ(free_memory(), before);  // cuMemGetInfo sweeps dead processes
}

TEST_F(ApiShareTest, VmmShareableFdImportOutlivesTheExportersRelease) {
  const size_t before = free_memory();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  const size_t size = 2 * granularity;
  CUmemGenericAllocationHandle plain = 0;
  ASSERT_EQ(cuMemCreate(&plain, size, &prop, 0), CUDA_SUCCESS);
  int fd = -1;
  // Only an allocation created for this handle type can be exported.
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemRelease(plain), CUDA_SUCCESS);

  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  ASSERT_GE(fd, 0);
  Importer child({"vmm", std::to_string(kSharedFd)}, fd);
  ::close(fd);
  const auto mapped = child.next();
  ASSERT_EQ(mapped.what, "mapped");
  EXPECT_EQ(mapped.rc, CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before - size);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);  // never mapped here: our last reference
  EXPECT_EQ(free_memory(), before - size);
  child.cue();
  EXPECT_EQ(child.next().rc, CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before);
}

TEST_F(ApiShareTest, PoolPointerImportIsFreedByCuMemFree) {
  const size_t before = free_memory();
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemoryPool plain = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&plain, &props), CUDA_SUCCESS);
  int fd = -1;
  EXPECT_EQ(
      cuMemPoolExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      CUDA_ERROR_INVALID_VALUE);  // not IPC-capable
  ASSERT_EQ(cuMemPoolDestroy(plain), CUDA_SUCCESS);

  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  ASSERT_EQ(
      cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&p, 16 * kMiB, pool, nullptr), CUDA_SUCCESS);
  CUmemPoolPtrExportData data{};
  ASSERT_EQ(cuMemPoolExportPointer(&data, p), CUDA_SUCCESS);
  Importer child({"pool", std::to_string(kSharedFd), hex(data.reserved, sizeof data.reserved)}, fd);
  ::close(fd);
  const auto imported = child.next();
  ASSERT_EQ(imported.what, "imported");
  EXPECT_EQ(imported.rc, CUDA_SUCCESS);
  EXPECT_EQ(imported.a, 16 * kMiB);
  EXPECT_EQ(free_memory(), before - 16 * kMiB);
  child.cue();
  EXPECT_EQ(child.next().rc, CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before - 16 * kMiB);  // the exporter's own allocation
  EXPECT_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before - 16 * kMiB);  // the pool keeps it until a synchronisation
  EXPECT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
}

TEST_F(ApiShareTest, ImportsOfOwnFdAndRefusals) {
  const size_t before = free_memory();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
            CUDA_ERROR_NOT_SUPPORTED);
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t{fd}),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  EXPECT_NE(imported, handle);
  CUmemAllocationProp got{};
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&got, imported), CUDA_SUCCESS);
  EXPECT_EQ(got.location.id, 0);
  EXPECT_EQ(free_memory(), before - 2 * kMiB);  // one allocation, two references
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before - 2 * kMiB);
  EXPECT_EQ(cuMemRelease(imported), CUDA_SUCCESS);
  EXPECT_EQ(free_memory(), before);
  // Not an fd we exported: refused.
  const int other = ::memfd_create("not-simgpu", MFD_CLOEXEC);
  EXPECT_EQ(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t{other}),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_INVALID_VALUE);
  ::close(other);
  ::close(fd);
  // An IPC handle of something that is not a cuMemAlloc allocation.
  CUdeviceptr managed = 0;
  ASSERT_EQ(cuMemAllocManaged(&managed, kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  CUipcMemHandle ipc{};
  EXPECT_EQ(cuIpcGetMemHandle(&ipc, managed), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuIpcCloseMemHandle(managed), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(managed), CUDA_SUCCESS);
}

}  // namespace
}  // namespace egpu::simgpu::testing
