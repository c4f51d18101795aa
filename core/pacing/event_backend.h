// The device-event operations the pacing logic needs, behind an interface: the
// shim implements it with CUDA events, unit tests with a simulated stream. Pacing
// code never includes CUDA headers.
#pragma once

#include <cstdint>

namespace egpu::pacing {

// Opaque handles: a CUevent / CUstream in the shim, an index in tests.
using EventHandle = std::uintptr_t;
using StreamHandle = std::uintptr_t;

enum class EventState {
  kComplete,  // the work recorded before the event has finished
  kPending,   // still queued or running
  kFailed,    // the event or its context is unusable: forget it
};

class EventBackend {
 public:
  virtual ~EventBackend() = default;

  // A timing-capable event in the current context.
  virtual bool create_event(EventHandle* event) = 0;
  virtual void destroy_event(EventHandle event) = 0;
  // Records `event` after the work already queued on `stream`.
  virtual bool record(EventHandle event, StreamHandle stream) = 0;
  // Non-blocking.
  virtual EventState query(EventHandle event) = 0;
  // Device time between two completed events, in nanoseconds (may be negative
  // when `end` completed first).
  virtual bool elapsed_ns(EventHandle start, EventHandle end, int64_t* ns) = 0;
};

}  // namespace egpu::pacing
