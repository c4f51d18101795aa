// RAII handles for libevent objects.
#pragma once

#include <event2/event.h>

#include <memory>

namespace egpu::agent {

struct EventFree {
  void operator()(event* e) const { event_free(e); }
};
struct EventBaseFree {
  void operator()(event_base* b) const { event_base_free(b); }
};
using EventHandle = std::unique_ptr<event, EventFree>;
using EventBaseHandle = std::unique_ptr<event_base, EventBaseFree>;

}  // namespace egpu::agent
