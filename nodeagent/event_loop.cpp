#include "nodeagent/event_loop.h"

namespace egpu::agent {

Result<EventBaseHandle> make_agent_event_base() {
  event_config* cfg = event_config_new();
  if (cfg == nullptr) return Error{"cannot create the event loop"};
  // Precise timers (timerfd): FAA acts on sub-millisecond deadlines, which
  // epoll's millisecond timeout would round up.
  event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
  // After each callback of the control plane, due timers and the data
  // plane come first.
  if (event_config_set_max_dispatch_interval(cfg, nullptr, 1, kControlPlanePriority) != 0) {
    event_config_free(cfg);
    return Error{"cannot bound the event loop's dispatch"};
  }
  EventBaseHandle base(event_base_new_with_config(cfg));
  event_config_free(cfg);
  if (!base) return Error{"cannot create the event loop"};
  if (event_base_priority_init(base.get(), 2) != 0)
    return Error{"cannot give the event loop priorities"};
  return base;
}

bool on_data_plane(event* ev) {
  return ev != nullptr && event_priority_set(ev, kDataPlanePriority) == 0;
}

}  // namespace egpu::agent
