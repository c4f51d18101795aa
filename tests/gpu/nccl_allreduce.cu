// nccl_allreduce: an NCCL all-reduce program for tests/gpu/validate (case f),
// one process per rank, run under the egpu shim. NCCL reaches the driver as
// NCCL programs do: its static cudart resolves entry points with
// cuGetProcAddress; it launches with cuLaunchKernelEx and, with cuMem on,
// allocates with cuMemCreate. Memory in use is measured as the instance sees
// it (cuMemGetInfo through the driver API, total - free: under the shim the
// instance's quota and use) and as the driver sees it for this process
// (NVML's usedGpuMemory of this pid), once before NCCL's init and once after
// it plus two all-reduces: the deltas are what NCCL and the buffers took, as
// egpu counted them and as the driver did. Then float sums are all-reduced
// for --warmup-s uncounted and --duration-s counted; the first result is
// checked whole, every later one at one element set to NaN before it, so a
// skipped or wrong all-reduce fails. Ranks stop together: the last element is
// a stop flag each rank raises when its time is up, so none waits in a
// collective its peers never enter. Rendezvous by files: rank 0 measures and
// writes ncclGetUniqueId to --id-file (tmp + rename; the path must be new),
// each other rank reads it, measures and creates ID-FILE.ready.R, and rank 0
// waits for those: every "before" precedes every init. Never hangs: the init
// is non-blocking (blocking=0) and polled against a deadline, and each step
// runs under alarm(): an overrun prints "timed out in STEP" and exits 1, as
// every CUDA or NCCL error does.
//
//   nccl_allreduce --rank R --nranks N --id-file PATH [--mib M] [--duration-s S]
//                  [--warmup-s W] [--timeout-s T] [--label L] [--progress]
// Prints one JSON object on stdout; with --progress a line
// "nccl-allreduce[pid] t=<s>s iterations=<n>" on stderr every second.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "shim_counters.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int rank = -1, nranks = 0;
  std::string id_file, label = "nccl";
  long mib = 32;
  double duration_s = 10, warmup_s = 2;
  unsigned timeout_s = 30;
  bool progress = false;
};

int g_rank = -1;
char g_alarm_message[256] = "nccl_allreduce: timed out\n";

extern "C" void on_alarm(int) {
  const ssize_t n = write(STDERR_FILENO, g_alarm_message, std::strlen(g_alarm_message));
  (void)n;
  _exit(1);
}

// Each step runs under a fresh alarm: a hang anywhere is reported by name.
void step(const char* name, unsigned seconds) {
  alarm(0);
  std::snprintf(g_alarm_message, sizeof g_alarm_message,
                "nccl_allreduce[rank %d]: timed out in %s (%u s)\n", g_rank, name, seconds);
  alarm(seconds);
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "nccl_allreduce[rank %d]: %s\n", g_rank, message.c_str());
  std::fflush(nullptr);
  _exit(1);  // not exit(): teardown could wait on a peer that is gone
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fail(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// An NCCL call on the non-blocking communicator: ncclInProgress is polled
// (ncclCommGetAsyncError) until it is done or `timeout_s` has passed.
void nccl_done(ncclComm_t comm, ncclResult_t r, const char* what, unsigned timeout_s) {
  const auto start = Clock::now();
  while (r == ncclInProgress) {
    if (seconds_since(start) > timeout_s) {
      fail(std::string("timed out in ") + what + " (" + std::to_string(timeout_s) + " s)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) fail("ncclCommGetAsyncError failed");
  }
  if (r != ncclSuccess) {
    const char* last = ncclGetLastError(comm);
    fail(std::string(what) + ": " + ncclGetErrorString(r) +
         (last != nullptr && *last != '\0' ? std::string(": ") + last : std::string()));
  }
}

// ---------------------------------------------------------------- memory views
// What the instance has in use: under the shim total = quota and free =
// quota - used; without the shim, the whole device's use.
unsigned long long egpu_used(unsigned long long* total_out) {
  size_t free_bytes = 0, total = 0;
  if (const CUresult r = cuMemGetInfo(&free_bytes, &total); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    fail(std::string("cuMemGetInfo: ") + (name != nullptr ? name : std::to_string(r)));
  }
  if (total_out != nullptr) *total_out = total;
  return total >= free_bytes ? total - free_bytes : 0;
}

// NVML, loaded at run time: this process's usedGpuMemory as the driver keeps it.
struct NvmlProcess {  // nvmlProcessInfo_v2_t, what the _v2 and _v3 queries fill
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id, compute_instance_id;
};
struct Nvml {
  using ProcessesFn = int (*)(void*, unsigned int*, NvmlProcess*);
  const char* (*error_string)(int) = nullptr;
  ProcessesFn processes = nullptr;  // null: unusable, `status` says why
  void* device = nullptr;
  std::string status = "ok";
  std::string error(const char* what, int r) const {
    return std::string(what) + ": " + (error_string ? error_string(r) : std::to_string(r));
  }
};

Nvml open_nvml(const char* pci_bus_id) {
  Nvml n;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    n.status = std::string("no libnvidia-ml.so.1: ") + dlerror();
    return n;
  }
  using InitFn = int (*)();
  using HandleFn = int (*)(const char*, void**);
  const auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  const auto handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  n.error_string = reinterpret_cast<const char* (*)(int)>(dlsym(lib, "nvmlErrorString"));
  for (const char* name :
       {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"}) {
    if (n.processes == nullptr) n.processes = reinterpret_cast<Nvml::ProcessesFn>(dlsym(lib, name));
  }
  if (init == nullptr || handle == nullptr || n.processes == nullptr) {
    n.status =
        "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or "
        "nvmlDeviceGetComputeRunningProcesses_v3/_v2";
    n.processes = nullptr;
    return n;
  }
  // NVML numbers every GPU of the machine: CUDA's device 0 is found by its bus id.
  int r = init();
  if (r == 0) r = handle(pci_bus_id, &n.device);
  if (r != 0) {
    n.status = n.error("nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2", r);
    n.processes = nullptr;
  }
  return n;
}

// This pid's usedGpuMemory, or -1 (the reason in n->status).
long long driver_used(Nvml* n) {
  if (n->processes == nullptr) return -1;
  std::vector<NvmlProcess> procs(256);
  auto count = static_cast<unsigned int>(procs.size());
  if (const int r = n->processes(n->device, &count, procs.data()); r != 0) {
    n->status = n->error("nvmlDeviceGetComputeRunningProcesses", r);
    return -1;
  }
  const auto pid = static_cast<unsigned int>(getpid());
  for (unsigned int i = 0; i < count && i < procs.size(); ++i) {
    if (procs[i].pid != pid) continue;
    if (procs[i].used_gpu_memory != ~0ULL) return static_cast<long long>(procs[i].used_gpu_memory);
    n->status = "NVML: usedGpuMemory not available for this process";
    return -1;
  }
  n->status = "NVML: pid " + std::to_string(pid) + " not among its " + std::to_string(count) +
              " compute processes (another PID namespace?)";
  return -1;
}

struct Memory {
  unsigned long long egpu_total = 0, egpu_before = 0, egpu_after = 0;
  long long driver_before = -1, driver_after = -1;
};

// ------------------------------------------------------------- rendezvous files
void wait_for(const std::string& path, off_t size, unsigned timeout_s, const char* what) {
  const auto start = Clock::now();
  struct stat st {};
  while (stat(path.c_str(), &st) != 0 || st.st_size < size) {
    if (seconds_since(start) > timeout_s) {
      fail(std::string("timed out in ") + what + " (" + std::to_string(timeout_s) + " s)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void write_file(const std::string& path, const void* data, size_t size) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) fail("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename " + tmp + " to " + path);
}

// Every rank's "before" is taken before any rank initialises NCCL.
ncclUniqueId rendezvous(const Options& o, Memory* m, Nvml* nvml) {
  ncclUniqueId id{};
  const auto measure = [&] {
    m->egpu_before = egpu_used(&m->egpu_total);
    m->driver_before = driver_used(nvml);
  };
  if (o.rank == 0) {
    if (o.nranks > 1 && access(o.id_file.c_str(), F_OK) == 0) {
      fail(o.id_file + " exists already: give each run a fresh path");
    }
    measure();
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      fail(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
    }
    if (o.nranks == 1) return id;
    write_file(o.id_file, &id, sizeof id);
    for (int r = 1; r < o.nranks; ++r) {
      wait_for(o.id_file + ".ready." + std::to_string(r), 0, o.timeout_s, "the rendezvous");
    }
    return id;
  }
  wait_for(o.id_file, sizeof id, o.timeout_s, "waiting for the id file");
  std::ifstream in(o.id_file, std::ios::binary);
  in.read(reinterpret_cast<char*>(&id), sizeof id);
  if (!in) fail("cannot read " + o.id_file);
  measure();
  write_file(o.id_file + ".ready." + std::to_string(o.rank), "", 0);
  return id;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--progress") {
      o->progress = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--rank")
      o->rank = std::atoi(v);
    else if (a == "--nranks")
      o->nranks = std::atoi(v);
    else if (a == "--id-file")
      o->id_file = v;
    else if (a == "--mib")
      o->mib = std::atol(v);
    else if (a == "--duration-s")
      o->duration_s = std::atof(v);
    else if (a == "--warmup-s")
      o->warmup_s = std::atof(v);
    else if (a == "--timeout-s")
      o->timeout_s = static_cast<unsigned>(std::atoi(v));
    else if (a == "--label")
      o->label = v;
    else
      return false;
  }
  return o->nranks >= 1 && o->rank >= 0 && o->rank < o->nranks &&
         (o->nranks == 1 || !o->id_file.empty()) && o->mib >= 1 && o->mib <= 65536 &&
         o->duration_s > 0 && o->warmup_s >= 0 && o->timeout_s >= 1;
}

constexpr const char* kUsage =
    "usage: nccl_allreduce --rank R --nranks N --id-file PATH [--mib M] [--duration-s S]\n"
    "                      [--warmup-s W] [--timeout-s T] [--label L] [--progress]\n";

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!parse(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  g_rank = o.rank;
  struct sigaction alarm_action {};
  alarm_action.sa_handler = on_alarm;
  sigemptyset(&alarm_action.sa_mask);
  sigaction(SIGALRM, &alarm_action, nullptr);
  const unsigned t = o.timeout_s;

  step("creating the CUDA context", t);
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(0) (context creation)");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  char bus_id[32] = {};
  check(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, 0), "cudaDeviceGetPCIBusId");
  Nvml nvml = open_nvml(bus_id);
  Memory mem;
  step("the rendezvous", 2 * t);
  const ncclUniqueId id = rendezvous(o, &mem, &nvml);

  step("ncclCommInitRank", t + 5);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const auto init_start = Clock::now();
  ncclResult_t r = ncclCommInitRankConfig(&comm, o.nranks, id, o.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    fail(std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r));
  }
  nccl_done(comm, r, "ncclCommInitRank", t);
  const double init_s = seconds_since(init_start);
  int version = 0;
  ncclGetVersion(&version);

  // Element i of rank r is (r + 1) * (1 + i % 7); the last element is the stop flag.
  step("allocating the buffers", t);
  const size_t count = static_cast<size_t>(o.mib) * (1 << 20) / sizeof(float);
  const size_t last = count - 1;
  float *send = nullptr, *recv = nullptr, *host = nullptr;
  check(cudaMalloc(&send, count * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&recv, count * sizeof(float)), "cudaMalloc");
  check(cudaMallocHost(&host, 4 * sizeof(float)), "cudaMallocHost");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<float> v(count);
  for (size_t i = 0; i < last; ++i)
    v[i] = static_cast<float>((o.rank + 1) * (1 + i % 7));
  v[last] = 0;
  check(cudaMemcpy(send, v.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  const float ranks_sum = static_cast<float>(o.nranks * (o.nranks + 1) / 2);
  const auto expected = [&](size_t i) { return ranks_sum * static_cast<float>(1 + i % 7); };
  const auto all_reduce = [&](const char* what, bool sync) {
    nccl_done(comm, ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s), what, t);
    if (sync) check(cudaStreamSynchronize(s), what);
  };

  step("the first all-reduce", t);
  all_reduce("the first all-reduce", true);
  check(cudaMemcpy(v.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (size_t i = 0; i < count; ++i) {
    const float want = i == last ? 0.0f : expected(i);
    if (v[i] != want) {
      fail("wrong first result: element " + std::to_string(i) + " = " + std::to_string(v[i]) +
           ", expected " + std::to_string(want));
    }
  }
  // A barrier: once the second all-reduce completes here, every rank has
  // finished its init and first all-reduce, so "after" sees all of them.
  step("the second all-reduce (barrier)", t);
  all_reduce("the second all-reduce", true);
  mem.egpu_after = egpu_used(nullptr);
  mem.driver_after = driver_used(&nvml);

  // Warm-up (uncounted), then the counted loop, until the iteration whose
  // result carries a raised stop flag (the same one on every rank).
  const auto warm_start = Clock::now();
  auto start = warm_start, next_progress = warm_start + std::chrono::seconds(1);
  bool counting = o.warmup_s <= 0, stop_sent = false;
  unsigned long long iterations = 0, warmup_iterations = 0;
  for (unsigned long long it = 0;; ++it) {
    step(counting ? "the all-reduce loop" : "the warm-up all-reduces", t);
    if (!counting && seconds_since(warm_start) >= o.warmup_s) {
      counting = true;
      start = Clock::now();
      next_progress = start + std::chrono::seconds(1);
    }
    if (counting && !stop_sent && seconds_since(start) >= o.duration_s) {
      host[2] = 1.0f;
      check(cudaMemcpyAsync(send + last, &host[2], sizeof(float), cudaMemcpyHostToDevice, s),
            "cudaMemcpyAsync (stop flag)");
      stop_sent = true;
    }
    const size_t k = static_cast<size_t>((it * 7919ULL + static_cast<unsigned>(o.rank)) % last);
    check(cudaMemsetAsync(recv + k, 0xff, sizeof(float), s), "cudaMemsetAsync");  // NaN
    all_reduce("ncclAllReduce", false);
    check(cudaMemcpyAsync(&host[0], recv + k, sizeof(float), cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync");
    check(cudaMemcpyAsync(&host[1], recv + last, sizeof(float), cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize (all-reduce loop)");
    if (host[0] != expected(k)) {
      fail("wrong result at iteration " + std::to_string(it) + ": element " + std::to_string(k) +
           " = " + std::to_string(host[0]) + ", expected " + std::to_string(expected(k)));
    }
    ++(counting ? iterations : warmup_iterations);
    if (o.progress && counting && Clock::now() >= next_progress) {
      next_progress += std::chrono::seconds(1);
      std::fprintf(stderr, "nccl-allreduce[%d] t=%.1fs iterations=%llu\n",
                   static_cast<int>(getpid()), seconds_since(start), iterations);
    }
    if (!std::isnan(host[1]) && host[1] > 0) break;
  }
  const double wall_s = seconds_since(start);

  step("ncclCommFinalize/ncclCommDestroy", t);
  nccl_done(comm, ncclCommFinalize(comm), "ncclCommFinalize", t);
  r = ncclCommDestroy(comm);  // frees comm: nothing to poll afterwards
  if (r != ncclSuccess && r != ncclInProgress) {
    fail(std::string("ncclCommDestroy: ") + ncclGetErrorString(r));
  }
  alarm(0);
  for (char& c : nvml.status)
    c = c == '"' || c == '\\' || c < ' ' ? '\'' : c;  // JSON-safe
  const auto json = [](long long b) { return b < 0 ? std::string("null") : std::to_string(b); };
  std::printf(
      "{\"workload\":\"nccl-allreduce\",\"label\":\"%s\",\"rank\":%d,\"nranks\":%d,"
      "\"device_name\":\"%s\",\"mib\":%ld,\"warmup_iterations\":%llu,\"iterations\":%llu,"
      "\"checked\":%llu,\"wall_s\":%.4f,\"it_per_s\":%.3f,\"init_s\":%.3f,"
      "\"nccl_version\":\"%d.%d.%d\",\"memory\":{\"egpu_total\":%llu,\"egpu_used_before\":%llu,"
      "\"egpu_used_after\":%llu,\"driver_used_before\":%s,\"driver_used_after\":%s,"
      "\"nvml\":\"%s\"},\"shim\":%s}\n",
      o.label.c_str(), o.rank, o.nranks, prop.name, o.mib, warmup_iterations, iterations,
      warmup_iterations + iterations + 1, wall_s,
      wall_s > 0 ? static_cast<double>(iterations) / wall_s : 0.0, init_s, version / 10000,
      version / 100 % 100, version % 100, mem.egpu_total, mem.egpu_before, mem.egpu_after,
      json(mem.driver_before).c_str(), json(mem.driver_after).c_str(), nvml.status.c_str(),
      shim_counters_json().c_str());
  std::fflush(stdout);
  return 0;
}
