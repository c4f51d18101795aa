#include "nodeagent/gpu_process_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>

#include "core/util/unique_fd.h"
#include "nodeagent/proc_files.h"

namespace egpu::agent {
namespace {

using model::managed_everywhere;

constexpr int kMaxAncestors = 64;

using Dir = std::unique_ptr<DIR, int (*)(DIR*)>;

void add_gpu(std::vector<uint32_t>& gpus, uint32_t gpu) {
  if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
}

// Where a process's files and maps are read: /proc/PID, or for a leader
// that exited (its own entries read empty) a thread of it still running.
std::string task_dir(pid_t pid, bool zombie) {
  const std::string dir = "/proc/" + std::to_string(pid);
  if (!zombie) return dir;
  const Dir tasks(opendir((dir + "/task").c_str()), closedir);
  if (!tasks) return dir;
  while (const dirent* e = readdir(tasks.get())) {
    if (e->d_name[0] != '.' && std::string_view(e->d_name) != std::to_string(pid))
      return dir + "/task/" + e->d_name;
  }
  return dir;
}

// What a process holds open of the GPUs' device files.
struct OpenGpuFiles {
  std::vector<uint32_t> gpus;
  std::vector<std::pair<uint32_t, DeviceFile>> aliases;  // other nodes of the same device
};

// Whether a descriptor's link names something that is never a device file.
bool never_a_device(std::string_view link) {
  return link.starts_with("socket:[") || link.starts_with("pipe:[") ||
         link.starts_with("anon_inode:");
}

// The GPUs whose device file a process holds open; nullopt past
// kMaxDescriptorsRead. First by the names its descriptors link to: a name
// that ends in a device's path counts (a process chrooted in its own mount
// namespace names /dev/nvidia0 /its/root/dev/nvidia0), and the maps then
// say whether it is the device (by device and inode). A name can hide the
// file, though: opened through a mount the process then detached (umount
// -l in its own mount namespace) it reads "/nvidia0", and a node of the
// device made elsewhere has any name. So every other descriptor that could
// be a file is looked at too: the same file (device and inode) or the same
// character device (its number) is the GPU's. AT_STATX_DONT_SYNC: a
// network or FUSE file answers from its cache where it has one rather than
// asking its server (which its user may run); a scan stuck anyway is given
// up like one stuck on a process's maps, and that process's files are
// known by their names alone from then on (`by_identity` false).
std::optional<OpenGpuFiles> open_gpus(const std::string& dir,
                                      const std::vector<DeviceFile>& devices, bool by_identity) {
  OpenGpuFiles open;
  const Dir fds(opendir((dir + "/fd").c_str()), closedir);
  if (!fds) return open;
  char target[4096];
  size_t read = 0;
  while (const dirent* e = readdir(fds.get())) {
    if (e->d_name[0] == '.') continue;
    if (++read > kMaxDescriptorsRead) return std::nullopt;
    const ssize_t n = readlinkat(dirfd(fds.get()), e->d_name, target, sizeof target);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof target) continue;
    const std::string_view path = without_deleted({target, static_cast<size_t>(n)});
    bool named = false;
    for (uint32_t g = 0; g < devices.size(); ++g) {
      if (!devices[g].path.empty() && path.ends_with(devices[g].path)) {
        add_gpu(open.gpus, g);
        named = true;
      }
    }
    if (named || !by_identity || never_a_device(path)) continue;
    struct statx stx {};
    if (::statx(dirfd(fds.get()), e->d_name, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) !=
        0) {
      continue;
    }
    const dev_t file_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    const dev_t rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
    for (uint32_t g = 0; g < devices.size(); ++g) {
      const DeviceFile& d = devices[g];
      const bool same_file = d.ino != 0 && d.dev == file_dev && d.ino == stx.stx_ino;
      const bool same_device = d.rdev != 0 && S_ISCHR(stx.stx_mode) && rdev == d.rdev;
      if (!same_file && !same_device) continue;
      add_gpu(open.gpus, g);
      if (!same_file) open.aliases.emplace_back(g, DeviceFile{file_dev, stx.stx_ino, {}, rdev});
    }
  }
  return open;
}

// The user namespace of `pid` (0: this process) as /proc names it
// ("user:[inode]"); empty when it cannot be read.
std::string user_namespace(pid_t pid) {
  char link[64] = {};
  const std::string path =
      pid > 0 ? "/proc/" + std::to_string(pid) + "/ns/user" : "/proc/self/ns/user";
  const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
}

// The user whose process `pid` (real uid `uid`) is judged as: `uid` when it
// is one of `uids`; else, for a process in a user namespace (a user's
// subordinate uids, /etc/subuid and newuidmap, or an unprivileged
// `unshare -U`), the first uid of `uids` that owns that namespace or one
// it is nested in. Without this, a process run as one of its user's
// subordinate uids was never looked at.
std::optional<uid_t> judged_uid(pid_t pid, uid_t uid, const std::set<uid_t>& uids,
                                const std::string& own_namespace) {
  if (uids.contains(uid)) return uid;
  const std::string ns = user_namespace(pid);
  if (ns.empty() || ns == own_namespace) return std::nullopt;
  UniqueFd fd(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  for (int depth = 0; fd.valid() && depth < 33; ++depth) {  // the kernel nests 32 at most
    uid_t owner = 0;
    if (::ioctl(fd.get(), NS_GET_OWNER_UID, &owner) != 0) return std::nullopt;
    if (owner != 0 && uids.contains(owner)) return owner;
    fd = UniqueFd(::ioctl(fd.get(), NS_GET_PARENT));  // fails at the agent's own
  }
  return std::nullopt;
}

uint64_t gpu_bits(const std::vector<uint32_t>& gpus) {
  uint64_t bits = 0;
  for (const uint32_t g : gpus)
    bits |= g < 64 ? uint64_t{1} << g : 0;
  return bits;
}

}  // namespace

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
      if (S_ISCHR(st.st_mode)) f.rdev = st.st_rdev;
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
                      const std::vector<DeviceFile>& shims, bool stop_at_shim,
                      const std::vector<std::pair<uint32_t, DeviceFile>>& aliases) {
  MapsFinding found;
  std::string line;
  while (std::getline(maps, line)) {
    const auto mapped = parse_maps_line(line);
    if (!mapped) continue;  // anonymous, or not a mapping line
    const std::string_view path = mapped->path;
    const auto same = [&](const DeviceFile& f) {
      return f.ino != 0 ? f.dev == mapped->dev && f.ino == mapped->ino
                        : !path.empty() && path == f.path;
    };
    for (uint32_t g = 0; g < devices.size(); ++g) {
      if (same(devices[g])) add_gpu(found.gpus, g);
    }
    for (const auto& [g, alias] : aliases) {
      if (same(alias)) add_gpu(found.gpus, g);
    }
    // The shim by identity, or by its path (only root can put a file
    // there): on overlayfs, maps name the underlying file's device and
    // inode, not the ones stat() says; and one an upgrade replaced is
    // named by its path and " (deleted)".
    for (const DeviceFile& shim : shims) {
      if (same(shim) || (!path.empty() && path == shim.path)) found.maps_shim = true;
    }
    if (found.maps_shim && stop_at_shim) break;
  }
  return found;
}

namespace {

// Fills `s->ancestors` (nearest first, all of them: each attached one may
// cover other GPUs); whether `s` or one of them is attached anywhere.
bool attached_or_below(model::GpuProcessSighting* s, pid_t ppid,
                       const model::AttachedProcesses& attached) {
  bool any = attached.contains(s->pid);
  for (pid_t p = ppid; p > 1 && s->ancestors.size() < kMaxAncestors;) {
    s->ancestors.push_back(p);
    any = any || attached.contains(p);
    const auto parent = read_proc_status(p);
    p = parent ? parent->ppid : 0;
  }
  return any;
}

}  // namespace

std::optional<model::GpuProcessSighting> stuck_sighting(pid_t pid, uint64_t open_gpus,
                                                        size_t gpu_count,
                                                        const model::AttachedProcesses& attached) {
  const auto status = read_proc_status(pid);
  if (!status || open_gpus == 0 || open_gpus == ~uint64_t{0}) return std::nullopt;
  model::GpuProcessSighting s;
  s.pid = pid;
  s.uid = status->uid;
  s.process_uid = status->uid;
  s.start_time = process_start_time(pid);
  if (s.start_time == 0) return std::nullopt;
  for (uint32_t g = 0; g < gpu_count && g < 64; ++g) {
    if (open_gpus & (uint64_t{1} << g)) s.gpus.push_back(g);
  }
  // Attached itself or below an attached process: taken to map the shim
  // (the model judges each GPU by where those are attached).
  s.maps_shim = attached_or_below(&s, status->ppid, attached);
  return s;
}

std::vector<model::GpuProcessSighting> scan_gpu_processes(const GpuProcessScanRequest& request,
                                                          ScanProgress* progress) {
  std::vector<model::GpuProcessSighting> out;
  if (request.uids.empty() || request.devices.empty()) return out;
  const Dir proc(opendir("/proc"), closedir);
  if (!proc) return out;
  const std::string own_namespace = user_namespace(0);
  const auto mark = [progress](pid_t pid, uint64_t open) {
    if (progress == nullptr) return;
    std::lock_guard lock(progress->mu);
    progress->open_pid = pid;
    progress->open_gpus = open;
    progress->pid.store(pid, std::memory_order_relaxed);
  };
  while (const dirent* e = readdir(proc.get())) {
    char* end = nullptr;
    const long value = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || value <= 0) continue;
    const auto pid = static_cast<pid_t>(value);
    mark(pid, 0);
    const auto status = read_proc_status(pid);
    if (!status || status->uid == 0) continue;
    const std::optional<uid_t> judged = judged_uid(pid, status->uid, request.uids, own_namespace);
    if (!judged) continue;
    const std::string dir = task_dir(pid, status->zombie);
    model::GpuProcessSighting s;
    s.pid = pid;
    s.uid = *judged;
    s.process_uid = status->uid;
    s.start_time = process_start_time(pid);
    if (s.start_time == 0) continue;  // gone
    const auto unreadable = request.maps_unreadable.find(pid);
    const bool stuck_before =
        unreadable != request.maps_unreadable.end() && unreadable->second == s.start_time;
    // One a scan got stuck on before: by the names of its files alone.
    const auto open = open_gpus(dir, request.devices, /*by_identity=*/!stuck_before);
    if (open && open->gpus.empty()) continue;  // not a GPU's user
    // Attached itself, or forked from an attached process: managed where it
    // is attached if it maps the shim (the maps say).
    const bool attached = attached_or_below(&s, status->ppid, request.attached);
    mark(pid, open ? gpu_bits(open->gpus) : ~uint64_t{0});
    if (stuck_before) {
      // Its maps waited on it before: judged by its open files and its
      // attachment, never read again (nor at all when those are not known).
      if (!open) continue;
      s.gpus = open->gpus;
      s.maps_shim = attached;
    } else {
      // Attached on every GPU whose file it holds: only the shim is asked of
      // its maps, read no further than it. Otherwise they say which GPUs it
      // maps (a file held open is not a GPU used: libcuda may open devices
      // it never makes a context on).
      const bool open_covered =
          attached && open && std::all_of(open->gpus.begin(), open->gpus.end(), [&](uint32_t g) {
            return model::attached_on(s, g, request.attached);
          });
      std::ifstream maps(dir + "/maps");
      const MapsFinding found =
          read_maps(maps, request.devices, request.shims, /*stop_at_shim=*/open_covered,
                    open ? open->aliases : std::vector<std::pair<uint32_t, DeviceFile>>{});
      s.gpus = open_covered && found.maps_shim ? open->gpus : found.gpus;
      s.maps_shim = found.maps_shim;
    }
    // No GPU, or managed on each (one attached on GPU 0 and driving GPU 1,
    // its EGPU_* environment changed, is reported: the model judges GPU 1).
    if (s.gpus.empty() || managed_everywhere(s, request.attached)) continue;
    // Gone or replaced meanwhile (a pid reused between the reads): nothing.
    if (process_start_time(pid) != s.start_time) continue;
    if (progress != nullptr) {
      std::lock_guard lock(progress->mu);
      progress->found.push_back(s);
    }
    out.push_back(std::move(s));
  }
  mark(0, 0);
  return out;
}

}  // namespace egpu::agent
