#include "nodeagent/process_tracker.h"

#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "nodeagent/event_loop.h"

namespace egpu::agent {

ProcessTracker::ProcessTracker(event_base* base, ExitCallback on_exit)
    : base_(base), on_exit_(std::move(on_exit)) {}

ProcessTracker::~ProcessTracker() = default;

Status ProcessTracker::track(const Attachment& a) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, a.pid, 0));
  if (fd < 0) {
    return Error{"cannot watch process " + std::to_string(a.pid) + ": " + std::strerror(errno)};
  }
  return track(a, UniqueFd(fd));
}

Status ProcessTracker::track(const Attachment& a, UniqueFd pidfd) {
  const auto key = std::make_pair(a.instance_id, a.proc_slot);
  const int fd = pidfd.get();
  auto w = std::make_unique<Watch>();
  w->attachment = a;
  w->pidfd = std::move(pidfd);
  w->owner = this;
  w->ev.reset(event_new(base_, fd, EV_READ, &ProcessTracker::on_readable, w.get()));
  // A process's exit frees its share at once: the data plane.
  if (!on_data_plane(w->ev.get()) || event_add(w->ev.get(), nullptr) != 0) {
    return Error{"cannot add a process watch to the event loop"};
  }
  watches_.insert_or_assign(key, std::move(w));  // a slot's earlier watch goes with its event
  return {};
}

void ProcessTracker::on_readable(evutil_socket_t, short, void* arg) {
  auto* w = static_cast<Watch*>(arg);
  ProcessTracker* self = w->owner;
  const Attachment a = w->attachment;
  self->watches_.erase(std::make_pair(a.instance_id, a.proc_slot));  // frees w
  self->on_exit_(a);
}

void ProcessTracker::forget_instance(uint64_t instance_id) {
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (it->first.first == instance_id) {
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

std::set<pid_t> ProcessTracker::pids() const {
  std::set<pid_t> out;
  for (const auto& [slot, watch] : watches_)
    out.insert(watch->attachment.pid);
  return out;
}

std::optional<uid_t> ProcessTracker::real_uid(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    unsigned long uid = 0;
    if (fields >> uid) return static_cast<uid_t>(uid);
    return std::nullopt;
  }
  return std::nullopt;
}

bool ProcessTracker::maps_file(pid_t pid, dev_t dev, ino_t ino) {
  if (pid <= 0) return false;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // "start-end perms offset major:minor inode [path]", numbers in hex but the inode.
    std::istringstream fields(line);
    std::string range, perms, offset, device;
    unsigned long long inode = 0;
    if (!(fields >> range >> perms >> offset >> device >> inode)) continue;
    const auto colon = device.find(':');
    if (colon == std::string::npos || inode != static_cast<unsigned long long>(ino)) continue;
    const unsigned long major = std::strtoul(device.substr(0, colon).c_str(), nullptr, 16);
    const unsigned long minor = std::strtoul(device.substr(colon + 1).c_str(), nullptr, 16);
    if (makedev(major, minor) == dev) return true;
  }
  return false;
}

}  // namespace egpu::agent
