// The shim's fast path: host cost per launch of zero-length kernels on the
// simulated GPU, with the shim preloaded and its instance holding the slice
// alone (100 units) against the same program without the shim.
#pragma once

#include <nlohmann/json.hpp>

namespace egpu::bench {

struct FastPathOptions {
  int rounds = 7;             // interleaved with/without pairs
  long launches = 300000;     // per timed loop
  int loops_per_process = 3;  // shim_launch_bench --rounds; a process reports their median
};

// {"ns_per_launch": with - without (medians), "with_shim_ns": ..., ...}
nlohmann::json run_fast_path_bench(const FastPathOptions& options);

}  // namespace egpu::bench
