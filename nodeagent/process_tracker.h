// ProcessTracker: watches every attached process with a pidfd in the event
// loop, and reports its exit so its slot, memory and share are reclaimed at
// once (DESIGN.md: a crashed instance's share goes to the others at once).
#pragma once

#include <event2/event.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/event_handle.h"

namespace egpu::agent {

struct Attachment {
  pid_t pid;
  uint64_t instance_id;
  uint32_t gpu;
  uint32_t proc_slot;
};

class ProcessTracker {
 public:
  using ExitCallback = std::function<void(const Attachment&)>;
  ProcessTracker(event_base* base, ExitCallback on_exit);
  ~ProcessTracker();

  // Starts watching; a process already gone is reported as an error (the
  // caller reclaims its slot at once). One watch per slot: the job's page
  // says which slots are free, and a job that frees its own slots under
  // live processes gets them handed out again; the slot's new process
  // replaces its watch, so an instance costs the agent at most
  // kMaxProcsPerInstance descriptors however often its processes attach.
  Status track(const Attachment& attachment);
  // The same with the process's pidfd in hand (peer_pidfd): the watch is of
  // that process whatever becomes of its pid.
  Status track(const Attachment& attachment, UniqueFd pidfd);
  // Forgets the attachments of a removed instance.
  void forget_instance(uint64_t instance_id);
  size_t size() const { return watches_.size(); }
  // The processes watched now, each with the GPUs of its attachments.
  std::map<pid_t, std::set<uint32_t>> attached_gpus() const;

  // For pids read back from pages a job could write: whether it maps the
  // file `dev`/`ino` (/proc/PID/maps). (Its real uid: read_proc_status.)
  static bool maps_file(pid_t pid, dev_t dev, ino_t ino);

 private:
  struct Watch {
    Attachment attachment;
    UniqueFd pidfd;
    EventHandle ev;
    ProcessTracker* owner;
  };
  static void on_readable(evutil_socket_t fd, short what, void* arg);

  event_base* base_;
  ExitCallback on_exit_;
  // By instance and process slot.
  std::map<std::pair<uint64_t, uint32_t>, std::unique_ptr<Watch>> watches_;
};

}  // namespace egpu::agent
