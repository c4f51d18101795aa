// The agent's event loop: libevent with precise timers and two priorities.
// The data plane (each GPU's ticks, the heartbeat, process and step exits,
// signals) runs before the control plane (requests on the socket, shims'
// wake-ups, metrics, the latency control), and the loop looks for due
// data-plane events again after every control-plane callback: a flood of
// requests from jobs costs the agent CPU, not the slices' timing. Only what
// no job can trigger at will is on the data plane: libevent runs the
// control plane only when the data plane has nothing to do, so a job must
// not be able to keep it busy.
#pragma once

#include <sys/time.h>

#include <cstdint>

#include "core/util/result.h"
#include "nodeagent/event_handle.h"

namespace egpu::agent {

inline constexpr int kDataPlanePriority = 0;
inline constexpr int kControlPlanePriority = 1;  // libevent's default with two

Result<EventBaseHandle> make_agent_event_base();
// Puts an event on the data plane; false if libevent refused.
bool on_data_plane(event* ev);

// A delay in nanoseconds (>= 0) as the timeval libevent takes.
inline timeval timeval_from_ns(int64_t ns) {
  return timeval{static_cast<time_t>(ns / 1'000'000'000),
                 static_cast<suseconds_t>((ns % 1'000'000'000) / 1000)};
}

}  // namespace egpu::agent
