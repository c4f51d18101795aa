// The openb trace (Alibaba's GPU-sharing cluster, FGD, USENIX ATC'23): its GPU
// nodes and its tasks, read from the published CSV files. Columns are found by
// name in the header, so a reordered file reads the same; a row that does not
// parse is an error naming the file, line and column, never a silent skip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace egpu::clustersim {

struct NodeSpec {
  std::string name;
  uint32_t cpu_milli = 0;
  uint64_t memory_mib = 0;
  uint32_t gpus = 0;
  std::string model;  // "G2", "T4", "V100M16", ...
};

// The trace counts a GPU in thousandths.
inline constexpr uint32_t kTraceMilliPerGpu = 1000;

enum class Qos : uint8_t { kLatencySensitive, kBestEffort, kOther };

struct TaskSpec {
  std::string name;
  uint32_t cpu_milli = 0;
  uint64_t memory_mib = 0;
  uint32_t gpus = 0;                    // num_gpu: 0 (CPU only), 1, or several whole GPUs
  uint32_t gpu_milli = 0;               // per GPU: < 1000 is part of one GPU
  std::vector<std::string> gpu_models;  // gpu_spec split at '|': empty = any
  Qos qos = Qos::kOther;
  int64_t creation_s = 0;
  // GPU demand in thousandths of a GPU (gpus x gpu_milli).
  uint64_t gpu_demand_milli() const { return static_cast<uint64_t>(gpus) * gpu_milli; }
  bool shares_gpu() const { return gpus == 1 && gpu_milli < kTraceMilliPerGpu; }
};

// openb_node_list_*.csv: sn, cpu_milli, memory_mib, gpu, model.
Result<std::vector<NodeSpec>> load_openb_nodes(const std::string& path);
Result<std::vector<NodeSpec>> parse_openb_nodes(std::string_view text, const std::string& name);
// openb_pod_list_*.csv: name, cpu_milli, memory_mib, num_gpu, gpu_milli,
// gpu_spec, qos, creation_time (other columns are read past). A task asking
// for several GPUs must ask for whole ones (the trace has no other kind).
Result<std::vector<TaskSpec>> load_openb_tasks(const std::string& path);
Result<std::vector<TaskSpec>> parse_openb_tasks(std::string_view text, const std::string& name);

}  // namespace egpu::clustersim
