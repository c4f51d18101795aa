// The options every workload program takes.
#pragma once

#include <cstdint>
#include <string>

#include "options.h"

namespace egpu::workload {

struct CommonOptions {
  int device = 0;
  double duration_s = 10.0;  // 0: until a count limit or a signal
  std::string label;         // also exported as SIMGPU_LABEL unless already set
  double iters_per_us = 0;   // 0: self-calibrate at start (must then run alone)
  std::uint64_t seed = 1;
  bool progress = false;
};

void add_common_options(OptionParser& parser, CommonOptions& options);

// Throws UsageError for values out of range.
void validate_common_options(const CommonOptions& options);

}  // namespace egpu::workload
