// Small clusters and tasks for the simulator's tests.
#pragma once

#include <string>
#include <vector>

#include "tools/clustersim/cluster_state.h"
#include "tools/clustersim/openb_trace.h"

namespace egpu::clustersim::test {

inline NodeSpec node_spec(std::string name, uint32_t cpus, uint32_t gpus,
                          std::string model = "V100M16") {
  return NodeSpec{std::move(name), cpus * 1000, 256 * 1024, gpus, std::move(model)};
}

inline std::vector<const NodeSpec*> pointers(const std::vector<NodeSpec>& specs) {
  std::vector<const NodeSpec*> out;
  for (const NodeSpec& spec : specs)
    out.push_back(&spec);
  return out;
}

// A task of `cpus` CPUs asking `gpus` GPUs of `milli` thousandths each.
inline Demand demand(uint32_t cpus, uint32_t gpus, uint32_t milli) {
  Demand d;
  d.cpu_milli = cpus * 1000;
  d.memory_mib = 1024;
  d.gpus = gpus;
  d.gpu_milli = gpus == 0 ? 0 : milli;
  return d;
}

}  // namespace egpu::clustersim::test
