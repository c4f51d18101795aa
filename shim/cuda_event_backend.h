// pacing::EventBackend on the real driver's events (always the real functions,
// never the shim's wrappers). Events are created without BLOCKING_SYNC and are
// only ever queried, never synchronised on (which would spin a core).
#pragma once

#include "core/pacing/event_backend.h"

namespace egpu::shim {

class CudaEventBackend final : public pacing::EventBackend {
 public:
  bool create_event(pacing::EventHandle* event) override;
  void destroy_event(pacing::EventHandle event) override;
  bool record(pacing::EventHandle event, pacing::StreamHandle stream) override;
  pacing::EventState query(pacing::EventHandle event) override;
  bool elapsed_ns(pacing::EventHandle start, pacing::EventHandle end, int64_t* ns) override;
};

}  // namespace egpu::shim
