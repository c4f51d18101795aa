#include "nodeagent/gpu_process_scan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "nodeagent/process_tracker.h"

namespace egpu::agent {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

void add_gpu(std::vector<uint32_t>& gpus, uint32_t gpu) {
  if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
}

// The GPUs whose device file `pid` holds open (for a process whose maps
// could not be read): by the names /proc/PID/fd links to, read with
// readlink, which neither takes a lock of the process's memory nor asks the
// file's filesystem (a stat of a FUSE file would wait for its daemon).
std::vector<uint32_t> gpus_open(pid_t pid, const std::vector<DeviceFile>& devices) {
  std::vector<uint32_t> gpus;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  const std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return gpus;
  char target[4096];
  while (const dirent* e = readdir(d.get())) {
    if (e->d_name[0] == '.') continue;
    const ssize_t n = readlinkat(dirfd(d.get()), e->d_name, target, sizeof target);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof target) continue;
    std::string_view path(target, static_cast<size_t>(n));
    if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
    for (uint32_t g = 0; g < devices.size(); ++g) {
      if (path == devices[g].path) add_gpu(gpus, g);
    }
  }
  return gpus;
}

}  // namespace

uint64_t process_start_time(pid_t pid) {
  // Field 22, after the command's closing ')' (a command may hold spaces
  // and parentheses).
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  uint64_t value = 0;
  fields >> value;
  return value;
}

std::vector<DeviceFile> device_files(const std::vector<std::string>& paths) {
  std::vector<DeviceFile> out;
  out.reserve(paths.size());
  for (const std::string& path : paths) {
    DeviceFile f;
    f.path = path;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
      f.dev = st.st_dev;
      f.ino = st.st_ino;
      // As the kernel names it in /proc/PID/fd: no "//", "..", or links.
      if (char* real = ::realpath(path.c_str(), nullptr)) {
        f.path = real;
        std::free(real);
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

MapsFinding read_maps(std::istream& maps, const std::vector<DeviceFile>& devices,
                      std::string_view shim_name) {
  MapsFinding found;
  std::string line;
  while (std::getline(maps, line)) {
    // "start-end perms offset major:minor inode [path]": numbers in hex but
    // the inode; the path starts after the inode's spaces, and may hold any.
    unsigned major = 0;
    unsigned minor = 0;
    unsigned long long inode = 0;
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%*s %*s %*s %x:%x %llu %n", &major, &minor, &inode, &path_at) <
            3 ||
        inode == 0) {
      continue;  // anonymous, or not a mapping line
    }
    std::string_view path;
    if (path_at > 0 && static_cast<size_t>(path_at) <= line.size())
      path = std::string_view(line).substr(static_cast<size_t>(path_at));
    if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
    const dev_t dev = makedev(major, minor);
    for (uint32_t g = 0; g < devices.size(); ++g) {
      const DeviceFile& d = devices[g];
      const bool same = d.ino != 0 ? d.dev == dev && d.ino == static_cast<ino_t>(inode)
                                   : !path.empty() && path == d.path;
      if (same) add_gpu(found.gpus, g);
    }
    const size_t slash = path.rfind('/');
    if (!shim_name.empty() && slash != std::string_view::npos &&
        path.substr(slash + 1) == shim_name) {
      found.maps_shim = true;
    }
  }
  return found;
}

std::vector<model::GpuProcessSighting> scan_gpu_processes(const GpuProcessScanRequest& request,
                                                          std::atomic<pid_t>* reading) {
  std::vector<model::GpuProcessSighting> out;
  if (request.uids.empty() || request.devices.empty()) return out;
  const std::unique_ptr<DIR, int (*)(DIR*)> proc(opendir("/proc"), closedir);
  if (!proc) return out;
  while (const dirent* e = readdir(proc.get())) {
    char* end = nullptr;
    const long value = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || value <= 0) continue;
    const auto pid = static_cast<pid_t>(value);
    // The real uid, which a process cannot change without privileges (the
    // owner of /proc/PID is root's for a process that made itself
    // non-dumpable).
    const auto uid = ProcessTracker::real_uid(pid);
    if (!uid || *uid == 0 || !request.uids.contains(*uid)) continue;
    model::GpuProcessSighting s;
    s.pid = pid;
    s.uid = *uid;
    if (reading != nullptr) reading->store(pid, std::memory_order_relaxed);
    s.start_time = process_start_time(pid);
    if (request.maps_unreadable.contains(pid)) {
      s.gpus = gpus_open(pid, request.devices);
    } else {
      std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
      const MapsFinding found = read_maps(maps, request.devices, request.shim_name);
      s.gpus = found.gpus;
      s.maps_shim = found.maps_shim;
    }
    if (reading != nullptr) reading->store(0, std::memory_order_relaxed);
    // A process gone meanwhile reads as nothing; its start time says so.
    if (!s.gpus.empty() && s.start_time != 0) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace egpu::agent
