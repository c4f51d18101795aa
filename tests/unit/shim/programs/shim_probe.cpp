// shim_probe --path P [--launches N] [--alloc-mb M]
// A driver-API program that obtains cuLaunchKernel one of the ways real
// programs do and launches N short kernels, so the shim tests can check which
// wrapper they reached. Built twice: linked with -lcuda (every path), and with
// SHIM_PROBE_DLOPEN_ONLY, not linked, reaching the driver only through
// dlopen + dlsym like the CUDA runtime does.
//
// Paths: direct, procaddr0, procaddr2, procaddr-v1, procaddr-self,
// dlsym-procaddr, dlsym-launch, rtld-default. Prints one JSON line with the shim's wrapper
// call counters (-1 when no shim is loaded). --fork 1: after the launches,
// fork a child that calls into the driver API and exits; report its status.
// --capture 1: the launches are captured into a CUDA graph (capture reached
// through cuGetProcAddress, as the runtime does), which is then replayed twice.
// --memset 1: memsets reached the runtime's way (cuGetProcAddress, default and
// per-thread default stream), one of each, on a small buffer.
// --legacy 1: one of each pre-CUDA-4 launch (cuLaunch, cuLaunchGrid,
// cuLaunchGridAsync), reached through cuGetProcAddress and dlsym.
// --broken-stderr 1: stderr is a pipe nobody reads from (a log collector
// gone), as the shim logs into it.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void* g_driver = nullptr;

template <typename F>
F lookup(const char* name) {
  void* p = dlsym(g_driver, name);
  if (p == nullptr) {
    std::fprintf(stderr, "shim_probe: dlsym(%s) failed\n", name);
    std::exit(3);
  }
  return reinterpret_cast<F>(p);
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "shim_probe: %s failed: %d\n", what, static_cast<int>(r));
    std::exit(2);
  }
}

long long wrapper_calls(const char* name) {
  using Query = uint64_t (*)(const char*);
  auto query = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "egpu_shim_wrapper_calls"));
  return query != nullptr ? static_cast<long long>(query(name)) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "direct";
  int launches = 10;
  unsigned long long alloc_mb = 0;
  bool fork_child = false;
  bool capture = false;
  bool memset = false;
  bool legacy = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--path") == 0) path = argv[i + 1];
    if (std::strcmp(argv[i], "--launches") == 0) launches = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--alloc-mb") == 0) alloc_mb = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--fork") == 0) fork_child = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--capture") == 0) capture = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--memset") == 0) memset = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--legacy") == 0) legacy = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--broken-stderr") == 0 && std::atoi(argv[i + 1]) != 0) {
      int ends[2];
      if (pipe(ends) != 0 || dup2(ends[1], STDERR_FILENO) < 0) return 5;
      close(ends[0]);
      close(ends[1]);
    }
  }
  g_driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (g_driver == nullptr) {
    std::fprintf(stderr, "shim_probe: %s\n", dlerror());
    return 3;
  }
  const auto init = lookup<decltype(&cuInit)>("cuInit");
  const auto device_get = lookup<decltype(&cuDeviceGet)>("cuDeviceGet");
  const auto retain = lookup<decltype(&cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain");
  const auto set_current = lookup<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent");
  const auto load = lookup<decltype(&cuModuleLoadData)>("cuModuleLoadData");
  const auto get_function = lookup<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
  const auto stream_create = lookup<decltype(&cuStreamCreate)>("cuStreamCreate");
  const auto ctx_sync = lookup<decltype(&cuCtxSynchronize)>("cuCtxSynchronize");
  const auto mem_alloc = lookup<decltype(&cuMemAlloc_v2)>("cuMemAlloc_v2");
  const auto mem_free = lookup<decltype(&cuMemFree_v2)>("cuMemFree_v2");
  const auto mem_info = lookup<decltype(&cuMemGetInfo_v2)>("cuMemGetInfo_v2");

  check(init(0), "cuInit");
  CUdevice dev = 0;
  check(device_get(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(set_current(ctx), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  check(load(&module, "probe"), "cuModuleLoadData");
  CUfunction kernel = nullptr;
  check(get_function(&kernel, module, "spin"), "cuModuleGetFunction");
  CUstream stream = nullptr;
  check(stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  using Launch = decltype(&cuLaunchKernel);
  Launch launch = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  void* found = nullptr;
  if (path == "direct") {
#ifdef SHIM_PROBE_DLOPEN_ONLY
    std::fprintf(stderr, "shim_probe: this build is not linked with the driver\n");
    return 4;
#else
    launch = &cuLaunchKernel;
#endif
  } else if (path == "procaddr0" || path == "procaddr2") {
#ifdef SHIM_PROBE_DLOPEN_ONLY
    const auto gpa = lookup<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
#else
    const auto gpa = &cuGetProcAddress_v2;
#endif
    const cuuint64_t flags = path == "procaddr2" ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                 : CU_GET_PROC_ADDRESS_DEFAULT;
    check(gpa("cuLaunchKernel", &found, CUDA_VERSION, flags, &status), "cuGetProcAddress_v2");
    launch = reinterpret_cast<Launch>(found);
  } else if (path == "procaddr-v1") {
    using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
    const auto gpa = lookup<GetProcAddressV1>("cuGetProcAddress");
    check(gpa("cuLaunchKernel", &found, 11030, CU_GET_PROC_ADDRESS_DEFAULT), "cuGetProcAddress");
    launch = reinterpret_cast<Launch>(found);
  } else if (path == "dlsym-procaddr") {
    // What the CUDA runtime does: one dlsym, then everything through it.
    const auto gpa = lookup<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
    check(gpa("cuLaunchKernel", &found, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2");
    launch = reinterpret_cast<Launch>(found);
  } else if (path == "procaddr-self") {
    // cuGetProcAddress asked for itself must hand out the shim's, whose
    // answers are wrappers again.
    auto gpa = lookup<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
    void* self = nullptr;
    check(gpa("cuGetProcAddress", &self, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress(cuGetProcAddress)");
    gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(self);
    check(gpa("cuLaunchKernel", &found, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2");
    launch = reinterpret_cast<Launch>(found);
  } else if (path == "dlsym-launch") {
    launch = lookup<Launch>("cuLaunchKernel");
  } else if (path == "rtld-default") {
    launch = reinterpret_cast<Launch>(dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
  }
  if (launch == nullptr) {
    std::fprintf(stderr, "shim_probe: no cuLaunchKernel via %s\n", path.c_str());
    return 4;
  }

  using BeginCapture = CUresult (*)(CUstream, CUstreamCaptureMode);
  using EndCapture = decltype(&cuStreamEndCapture);
  BeginCapture begin_capture = nullptr;
  EndCapture end_capture = nullptr;
  if (capture) {
    const auto gpa = lookup<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
    void* fn = nullptr;
    check(gpa("cuStreamBeginCapture", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2(cuStreamBeginCapture)");
    begin_capture = reinterpret_cast<BeginCapture>(fn);
    check(gpa("cuStreamEndCapture", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2(cuStreamEndCapture)");
    end_capture = reinterpret_cast<EndCapture>(fn);
    check(begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  }
  unsigned long long ns = 1000;
  void* params[] = {&ns};
  for (int i = 0; i < launches; ++i) {
    check(launch(kernel, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr), "cuLaunchKernel");
  }
  if (capture) {
    CUgraph graph = nullptr;
    check(end_capture(stream, &graph), "cuStreamEndCapture");
    CUgraphExec exec = nullptr;
    check(lookup<decltype(&cuGraphInstantiateWithFlags)>("cuGraphInstantiateWithFlags")(&exec,
                                                                                        graph, 0),
          "cuGraphInstantiateWithFlags");
    const auto graph_launch = lookup<decltype(&cuGraphLaunch)>("cuGraphLaunch");
    check(graph_launch(exec, stream), "cuGraphLaunch");
    check(graph_launch(exec, stream), "cuGraphLaunch");
  }
  if (memset) {
    const auto gpa = lookup<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
    void* fn = nullptr;
    CUdeviceptr buffer = 0;
    check(mem_alloc(&buffer, 1 << 20), "cuMemAlloc_v2");
    check(gpa("cuMemsetD32Async", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2(cuMemsetD32Async)");
    check(reinterpret_cast<decltype(&cuMemsetD32Async)>(fn)(buffer, 7, 1 << 18, stream),
          "cuMemsetD32Async");
    check(gpa("cuMemsetD8", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
              &status),
          "cuGetProcAddress_v2(cuMemsetD8, per-thread)");
    check(reinterpret_cast<decltype(&cuMemsetD8_v2)>(fn)(buffer, 1, 1 << 20), "cuMemsetD8");
    check(ctx_sync(), "cuCtxSynchronize");
    check(mem_free(buffer), "cuMemFree_v2");
  }
  if (legacy) {
    const auto gpa = lookup<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
    void* fn = nullptr;
    unsigned long long legacy_params[] = {1000, 0};
    check(lookup<PFN_cuParamSetSize_v2000>("cuParamSetSize")(kernel, sizeof legacy_params),
          "cuParamSetSize");
    check(lookup<PFN_cuParamSetv_v2000>("cuParamSetv")(kernel, 0, legacy_params,
                                                       sizeof legacy_params),
          "cuParamSetv");
    check(gpa("cuLaunch", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2(cuLaunch)");
    check(reinterpret_cast<PFN_cuLaunch_v2000>(fn)(kernel), "cuLaunch");
    check(lookup<PFN_cuLaunchGrid_v2000>("cuLaunchGrid")(kernel, 2, 1), "cuLaunchGrid");
    check(gpa("cuLaunchGridAsync", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
              &status),
          "cuGetProcAddress_v2(cuLaunchGridAsync, per-thread)");
    check(reinterpret_cast<PFN_cuLaunchGridAsync_v2000>(fn)(kernel, 1, 1, stream),
          "cuLaunchGridAsync");
    check(ctx_sync(), "cuCtxSynchronize");
  }
  check(ctx_sync(), "cuCtxSynchronize");

  size_t free_bytes = 0, total_bytes = 0;
  check(mem_info(&free_bytes, &total_bytes), "cuMemGetInfo_v2");
  if (alloc_mb > 0) {
    CUdeviceptr p = 0;
    const CUresult r = mem_alloc(&p, alloc_mb << 20);
    std::printf("{\"alloc_result\":%d}\n", static_cast<int>(r));
    if (r == CUDA_SUCCESS) check(mem_free(p), "cuMemFree_v2");
  }
  if (fork_child) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      // Whatever the driver answers in a forked child, the shim must neither
      // crash nor hang, nor write into its parent's slots.
      size_t f = 0, t = 0;
      (void)mem_info(&f, &t);
      CUdeviceptr p = 0;
      if (mem_alloc(&p, 1 << 20) == CUDA_SUCCESS) (void)mem_free(p);
      _exit(0);
    }
    int child_status = -1;
    waitpid(pid, &child_status, 0);
    std::printf("{\"child_exit\":%d}\n", WIFEXITED(child_status) ? WEXITSTATUS(child_status) : -1);
  }
  std::printf(
      "{\"path\":\"%s\",\"launches\":%d,\"cuLaunchKernel\":%lld,"
      "\"cuLaunchKernel_ptsz\":%lld,\"cuGetProcAddress_v2\":%lld,\"cuGetProcAddress\":%lld,"
      "\"cuStreamBeginCapture_v2\":%lld,\"cuStreamEndCapture\":%lld,\"cuGraphLaunch\":%lld,"
      "\"cuMemsetD32Async\":%lld,\"cuMemsetD8_v2_ptds\":%lld,\"cuLaunch\":%lld,"
      "\"cuLaunchGrid\":%lld,\"cuLaunchGridAsync\":%lld,\"total\":%llu}\n",
      path.c_str(), launches, wrapper_calls("cuLaunchKernel"), wrapper_calls("cuLaunchKernel_ptsz"),
      wrapper_calls("cuGetProcAddress_v2"), wrapper_calls("cuGetProcAddress"),
      wrapper_calls("cuStreamBeginCapture_v2"), wrapper_calls("cuStreamEndCapture"),
      wrapper_calls("cuGraphLaunch"), wrapper_calls("cuMemsetD32Async"),
      wrapper_calls("cuMemsetD8_v2_ptds"), wrapper_calls("cuLaunch"), wrapper_calls("cuLaunchGrid"),
      wrapper_calls("cuLaunchGridAsync"), static_cast<unsigned long long>(total_bytes));
  return 0;
}
