// unmanaged_scan_bench: what the agent's once-a-second look for processes
// that use a GPU without the shim costs (nodeagent/gpu_process_scan.h, run on
// a worker): one scan of /proc with 200 processes of a judged user that hold
// no GPU (their descriptors are read), the same holding and mapping a GPU's
// file unattached (their maps are read too: the worst case), then with one
// more that has 60,000 mappings (near vm.max_map_count: the most a job can
// make one maps file cost). Prints one JSON object:
//   {"unmanaged_scan": {"proc_processes": .., "judged_processes": ..,
//                       "scan_ms_no_gpu": .., "scan_ms": .., "scan_ms_with_60000_maps": ..}}
// (medians of 7 scans). Run as root (the children run as another user).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "nodeagent/gpu_process_scan.h"

namespace {

constexpr uid_t kJudged = 4246;

// A child of the judged user that maps `mappings` separate pages, then
// waits; with `gpu` (a descriptor) open and mapped.
pid_t spawn(int mappings, int gpu) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    const long page = ::sysconf(_SC_PAGESIZE);
    if (gpu >= 0 &&
        ::mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_SHARED, gpu, 0) == MAP_FAILED) {
      ::_exit(1);
    }
    for (int i = 0; i < mappings; ++i) {
      // Alternating protections keep neighbours from merging into one line.
      if (::mmap(nullptr, static_cast<size_t>(page), (i % 2) ? PROT_READ : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) {
        break;
      }
    }
    if (::geteuid() == 0 && (::setgid(kJudged) != 0 || ::setuid(kJudged) != 0)) ::_exit(1);
    if (::write(ready[1], "r", 1) != 1) ::_exit(1);
    for (;;)
      ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  const bool ok = pid > 0 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  return ok ? pid : -1;
}

int proc_processes() {
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d))
    n += e->d_name[0] >= '1' && e->d_name[0] <= '9';
  ::closedir(d);
  return n;
}

double median_scan_ms(const egpu::agent::GpuProcessScanRequest& request) {
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto start = std::chrono::steady_clock::now();
    egpu::agent::ScanProgress progress;
    (void)egpu::agent::scan_gpu_processes(request, &progress);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void stop(std::vector<pid_t>& children) {
  for (const pid_t pid : children)
    ::kill(pid, SIGKILL);
  for (const pid_t pid : children)
    ::waitpid(pid, nullptr, 0);
  children.clear();
}

}  // namespace

int main() {
  // The idle children first: they must not inherit the GPU's descriptor.
  std::vector<pid_t> children;
  for (int i = 0; i < 200; ++i) {
    const pid_t pid = spawn(0, -1);
    if (pid > 0) children.push_back(pid);
  }
  char path[] = "/tmp/egpu-scan-bench-gpu-XXXXXX";
  const int gpu = ::mkstemp(path);
  if (gpu < 0 || ::ftruncate(gpu, ::sysconf(_SC_PAGESIZE)) != 0) return 1;
  egpu::agent::GpuProcessScanRequest request;
  request.uids = {::geteuid() == 0 ? kJudged : ::geteuid()};
  request.devices = egpu::agent::device_files({path});
  const double no_gpu = median_scan_ms(request);
  const size_t idle = children.size();
  stop(children);
  for (int i = 0; i < 200; ++i) {
    const pid_t pid = spawn(0, gpu);
    if (pid > 0) children.push_back(pid);
  }
  const double plain = median_scan_ms(request);
  const pid_t big = spawn(60000, gpu);
  const double with_big = big > 0 ? median_scan_ms(request) : -1;
  const int processes = proc_processes();
  if (big > 0) children.push_back(big);
  const size_t judged = children.size();
  stop(children);
  ::unlink(path);
  std::printf(
      "{\"unmanaged_scan\": {\"proc_processes\": %d, \"judged_processes\": %zu, "
      "\"scan_ms_no_gpu\": %.2f, \"scan_ms\": %.2f, \"scan_ms_with_60000_maps\": %.2f}}\n",
      processes, judged, no_gpu, plain, with_big);
  return idle == 200 && judged == 201 ? 0 : 1;
}
