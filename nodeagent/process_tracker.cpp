#include "nodeagent/process_tracker.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "nodeagent/event_loop.h"
#include "nodeagent/proc_files.h"

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

std::map<pid_t, std::set<uint32_t>> ProcessTracker::attached_gpus() const {
  std::map<pid_t, std::set<uint32_t>> out;
  for (const auto& [slot, watch] : watches_)
    out[watch->attachment.pid].insert(watch->attachment.gpu);
  return out;
}

bool ProcessTracker::maps_file(pid_t pid, dev_t dev, ino_t ino) {
  if (pid <= 0) return false;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto mapped = parse_maps_line(line);
    if (mapped && mapped->dev == dev && mapped->ino == ino) return true;
  }
  return false;
}

}  // namespace egpu::agent
