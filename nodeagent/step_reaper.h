// StepReaper: frees the instances whose step ended without saying so.
// SPANK removes a step's instances when the step ends; if the agent could not
// be reached then (stopped, restarting, overloaded), they would hold their
// units for good and later jobs on the GPU would be refused. A step lives as
// long as its slurmstepd, which asked for its instances
// (protocol::kCreateEndsWithCaller): the reaper watches that process with a
// pidfd, also across agent restarts (pid and start time are kept in the GPU
// page), and reports each instance whose creator is gone.
#pragma once

#include <event2/event.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "core/model/instance_registry.h"
#include "core/util/unique_fd.h"
#include "nodeagent/event_handle.h"

namespace egpu::agent {

class StepReaper {
 public:
  using GoneCallback = std::function<void(uint64_t instance_id)>;
  StepReaper(event_base* base, GoneCallback on_gone);
  StepReaper(const StepReaper&) = delete;
  StepReaper& operator=(const StepReaper&) = delete;

  // The creator of a process `pid` now (its start time), for Instance::creator.
  static model::Creator creator_of(pid_t pid);

  // Watches `instance_id`'s creator (nothing when it has none). A creator
  // gone already (or whose pid is another process's now) is reported from
  // the loop's next turn, like one that ends later.
  void watch(uint64_t instance_id, const model::Creator& creator);
  void forget(uint64_t instance_id);

 private:
  struct Watch {
    StepReaper* owner;
    uint64_t instance_id;
    UniqueFd pidfd;
    EventHandle ev;
  };
  static void on_exit(evutil_socket_t fd, short what, void* arg);
  void report_soon(uint64_t instance_id);

  event_base* base_;
  GoneCallback on_gone_;
  std::map<uint64_t, std::unique_ptr<Watch>> watches_;  // by instance id
};

}  // namespace egpu::agent
