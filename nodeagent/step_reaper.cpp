#include "nodeagent/step_reaper.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "nodeagent/event_loop.h"
#include "nodeagent/proc_files.h"

namespace egpu::agent {

StepReaper::StepReaper(event_base* base, GoneCallback on_gone)
    : base_(base), on_gone_(std::move(on_gone)) {}

model::Creator StepReaper::creator_of(pid_t pid) {
  model::Creator c;
  c.pid = pid;
  c.start = static_cast<uint32_t>(process_start_time(pid));  // as the page records it
  return c;
}

void StepReaper::watch(uint64_t instance_id, const model::Creator& creator) {
  if (creator.pid <= 0) return;
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, creator.pid, 0));
  if (fd < 0) return report_soon(instance_id);  // gone
  UniqueFd pidfd(fd);
  // Opened first, compared after: a pid reused in between shows its start.
  if (creator.start != 0 && creator_of(creator.pid).start != creator.start) {
    return report_soon(instance_id);
  }
  auto w = std::make_unique<Watch>();
  w->owner = this;
  w->instance_id = instance_id;
  w->pidfd = std::move(pidfd);
  w->ev.reset(event_new(base_, w->pidfd.get(), EV_READ, &StepReaper::on_exit, w.get()));
  // Not watched is not gone: the instance then waits for SPANK's remove.
  // A step's end frees its share: the data plane (no job can flood it).
  if (!on_data_plane(w->ev.get()) || event_add(w->ev.get(), nullptr) != 0) return;
  watches_[instance_id] = std::move(w);
}

void StepReaper::report_soon(uint64_t instance_id) {
  // Through the loop: the caller may be in the middle of creating it.
  auto w = std::make_unique<Watch>();
  w->owner = this;
  w->instance_id = instance_id;
  w->ev.reset(evtimer_new(base_, &StepReaper::on_exit, w.get()));
  const timeval now{0, 0};
  if (!on_data_plane(w->ev.get()) || evtimer_add(w->ev.get(), &now) != 0) return;
  watches_[instance_id] = std::move(w);
}

void StepReaper::forget(uint64_t instance_id) {
  watches_.erase(instance_id);
}

void StepReaper::on_exit(evutil_socket_t, short, void* arg) {
  auto* w = static_cast<Watch*>(arg);
  StepReaper* self = w->owner;
  const uint64_t id = w->instance_id;
  self->watches_.erase(id);  // frees w
  self->on_gone_(id);
}

}  // namespace egpu::agent
