// The /proc scan behind UnmanagedProcessWatch (core/model/unmanaged_processes.h):
// which processes of the given users map a managed GPU's device file and are
// not managed (mapping the shim, attached or descended from an attached
// process). It runs off the agent's thread
// (nodeagent/unmanaged_process_scanner.h). Descriptors are looked at first,
// by the names /proc/PID/fd links to (readlink takes no lock of the process
// and asks no filesystem); only a process that holds a GPU's file open has
// its maps read, which takes its mmap lock, which the process can keep
// others waiting on.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <istream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/model/unmanaged_processes.h"

namespace egpu::agent {

// A GPU's device file: its path as the kernel names it (real path), and the
// filesystem's device and inode, as /proc/PID/maps shows a mapping of it
// (0, 0: it could not be looked up; its path alone is matched).
struct DeviceFile {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string path;
  dev_t rdev = 0;  // a character device's number (0: not one)
};

// Looks up each path (by GPU index), named as the kernel does (its real
// path); one that does not exist keeps its path.
std::vector<DeviceFile> device_files(const std::vector<std::string>& paths);

struct MapsFinding {
  std::vector<uint32_t> gpus;  // GPUs whose device file is mapped
  bool maps_shim = false;      // one of `shims` is mapped
};

// Reads a /proc/PID/maps text. `shims`: the shim's files, matched by
// device and inode or by path (which only root can put a file at).
// `stop_at_shim`: stop reading once the shim is found (the GPUs found so
// far are then all it says).
// `aliases`: other files that are a GPU's device (by GPU index), as a
// process's open descriptors showed them (a node of the same device made
// elsewhere, e.g. in a container's /dev).
MapsFinding read_maps(std::istream& maps, const std::vector<DeviceFile>& devices,
                      const std::vector<DeviceFile>& shims, bool stop_at_shim = false,
                      const std::vector<std::pair<uint32_t, DeviceFile>>& aliases = {});

struct GpuProcessScanRequest {
  std::set<uid_t> uids;  // whose processes to look at (never root)
  std::vector<DeviceFile> devices;
  std::vector<DeviceFile> shims;
  // With the shim mapped, managed on these GPUs with their descendants.
  model::AttachedProcesses attached;
  // Processes (pid -> start time) whose maps an earlier scan could not read
  // in time: judged by the GPU files they hold open.
  std::map<pid_t, uint64_t> maps_unreadable;
};

// What a scan has done so far, for a caller that gives up waiting on it.
struct ScanProgress {
  std::atomic<pid_t> pid{0};  // the process being looked at (0: none)
  std::mutex mu;
  pid_t open_pid = 0;                            // whose open GPU files `open_gpus` are (under mu)
  uint64_t open_gpus = 0;                        // bit per GPU; all bits: not known (under mu)
  std::vector<model::GpuProcessSighting> found;  // sightings so far (under mu)
};

// Descriptors read per process at most: past them its maps are read
// instead (which vm.max_map_count bounds), so a process cannot make the
// scan slow with a million open files.
inline constexpr size_t kMaxDescriptorsRead = 4096;

// The sighting of a process a scan got stuck on while it read its maps
// (`open_gpus`: its GPU files open, ScanProgress's bits): judged by those
// and by its attachment (`attached` as in the request), which earns it the
// benefit of the doubt on the shim. Nullopt when it is gone, or its GPUs
// are not known (all bits: past kMaxDescriptorsRead).
std::optional<model::GpuProcessSighting> stuck_sighting(pid_t pid, uint64_t open_gpus,
                                                        size_t gpu_count,
                                                        const model::AttachedProcesses& attached);

// Scans /proc once; each sighting is also added to `progress`.
std::vector<model::GpuProcessSighting> scan_gpu_processes(const GpuProcessScanRequest& request,
                                                          ScanProgress* progress);

}  // namespace egpu::agent
