// libFuzzer target: the openb trace reader (CSV through libcsv, then columns
// by name): whatever it accepts keeps the promises the simulator relies on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tools/clustersim/openb_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto nodes = egpu::clustersim::parse_openb_nodes(text, "fuzz.csv"); nodes.ok()) {
    if (nodes->empty()) std::abort();
    for (const auto& node : *nodes) {
      if (node.gpus > 64) std::abort();
    }
  }
  if (auto tasks = egpu::clustersim::parse_openb_tasks(text, "fuzz.csv"); tasks.ok()) {
    if (tasks->empty()) std::abort();
    for (const auto& task : *tasks) {
      if (task.gpus > 64 || task.gpu_milli > 1000) std::abort();
      if (task.gpus > 0 && task.gpu_milli == 0) std::abort();
      if (task.gpus > 1 && task.gpu_milli != 1000) std::abort();
    }
  }
  return 0;
}
