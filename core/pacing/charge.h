// Charge: device time a pacing step attributes to the process.
#pragma once

#include <cstdint>

namespace egpu::pacing {

struct Charge {
  int64_t measured_ns = 0;   // between two completed markers (union over streams)
  int64_t estimated_ns = 0;  // launches whose end was never measured, at the estimate

  int64_t total() const { return measured_ns + estimated_ns; }
  Charge& operator+=(const Charge& o) {
    measured_ns += o.measured_ns;
    estimated_ns += o.estimated_ns;
    return *this;
  }
};

}  // namespace egpu::pacing
