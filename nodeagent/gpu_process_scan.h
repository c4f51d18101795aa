// The /proc scan behind UnmanagedProcessWatch (core/model/unmanaged_processes.h):
// which processes of the given users map a managed GPU's device file, and
// whether they map the shim. It runs off the agent's thread
// (nodeagent/unmanaged_process_scanner.h): reading a process's maps takes its
// mmap lock, which the process can keep others waiting on.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <istream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/unmanaged_processes.h"

namespace egpu::agent {

// A GPU's device file as the kernel names a mapping of it: the filesystem's
// device and the inode (what /proc/PID/maps shows), and its path for a file
// that could not be looked up (device 0, inode 0).
struct DeviceFile {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string path;
};

// /proc/PID/stat's starttime: with the pid, names one process (0: gone).
uint64_t process_start_time(pid_t pid);

// Looks up each path (by GPU index), and names it as the kernel does (its
// real path); one that does not exist keeps its path.
std::vector<DeviceFile> device_files(const std::vector<std::string>& paths);

struct MapsFinding {
  std::vector<uint32_t> gpus;  // GPU indices whose device file is mapped
  bool maps_shim = false;
};

// Reads a /proc/PID/maps text: the GPUs whose file appears and whether a
// file named `shim_name` (the shim library's file name; one an upgrade
// replaced reads "... (deleted)") does.
MapsFinding read_maps(std::istream& maps, const std::vector<DeviceFile>& devices,
                      std::string_view shim_name);

struct GpuProcessScanRequest {
  std::set<uid_t> uids;  // whose processes to look at (never root)
  std::vector<DeviceFile> devices;
  std::string shim_name;
  // Processes whose maps an earlier scan could not read in time: looked at
  // through their open descriptors alone (which takes no lock of theirs), and
  // taken not to map the shim.
  std::set<pid_t> maps_unreadable;
};

// Scans /proc once. `reading` is set to the pid whose files are being read
// (0 between them), so a caller can tell which process a stuck scan waits on.
std::vector<model::GpuProcessSighting> scan_gpu_processes(const GpuProcessScanRequest& request,
                                                          std::atomic<pid_t>* reading);

}  // namespace egpu::agent
