// LatencyMemorySaver: writes each GPU's latency-control memory (SloMemoryFile)
// off the agent's thread. Encoding a GPU of latency-critical instances'
// histories takes milliseconds to tens of them, and a job with a lend step
// beside latency-critical ones can change loans, and so ask for a save, every
// control period: on the loop, every slice end on every GPU of the node
// waited meanwhile. One write per GPU runs at a time; what comes meanwhile
// replaces what waited (only the newest memory matters), and a removal is
// one more such operation, so a late write never brings back a file
// removed after it. A loan is applied before its save is on disk: a crash
// in between restarts with the loans before it, which the control then
// moves again.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/slo/slo_memory_codec.h"
#include "core/util/result.h"

namespace egpu::agent {

class LatencyMemorySaver {
 public:
  // Writes `memory` for `gpu`, or removes the GPU's file (nullopt).
  using Write = std::function<Status(uint32_t gpu, const std::optional<slo::SloMemory>& memory)>;

  explicit LatencyMemorySaver(Write write) : write_(std::move(write)) {}
  ~LatencyMemorySaver() { wait_idle(); }  // its workers' tasks use it
  LatencyMemorySaver(const LatencyMemorySaver&) = delete;
  LatencyMemorySaver& operator=(const LatencyMemorySaver&) = delete;

  void save(uint32_t gpu, slo::SloMemory memory) { submit(gpu, std::move(memory)); }
  void remove(uint32_t gpu) { submit(gpu, std::nullopt); }
  // Returns once nothing is written or waiting (the agent's stop).
  void wait_idle();
  // The newest failure since the last call, for the agent to log.
  std::optional<std::string> take_failure();

 private:
  struct Gpu {
    bool writing = false;
    // The operation waiting behind the one written (nullopt inside: a removal).
    std::optional<std::optional<slo::SloMemory>> next;
  };

  void submit(uint32_t gpu, std::optional<slo::SloMemory> op);
  // Writes `op` and what comes behind it until nothing waits (a worker's task).
  void drain(uint32_t gpu, std::optional<slo::SloMemory> op) noexcept;

  const Write write_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::map<uint32_t, Gpu> gpus_;
  int writing_ = 0;
  std::optional<std::string> failure_;
};

}  // namespace egpu::agent
