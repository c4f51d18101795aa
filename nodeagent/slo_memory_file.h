// SloMemoryFile: a GPU's latency-control memory (core/slo/slo_memory_codec)
// in the agent's root-only runtime directory, so that a restarted agent
// keeps an instance's loan and model (LatencyControl::restore). Written
// whole to a new file and renamed over the old one, so a crash mid-write
// leaves the previous memory; never handed to a job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/slo/slo_memory_codec.h"
#include "core/util/result.h"

namespace egpu::agent {

class SloMemoryFile {
 public:
  // What save() writes for 256 latency-critical instances, whatever their
  // reports said, is under 4 MiB (a real one is well under 1 MiB).
  static constexpr std::size_t kMaxBytes = 8u << 20;

  static std::string path(const std::string& runtime_dir, uint32_t gpu);
  // nullopt when there is no file; an error names the file and what is
  // wrong (only a regular file of the agent's user, mode 0600 or less). A
  // file it cannot use is set aside; one it could not read now is not.
  static Result<std::optional<slo::SloMemory>> load(const std::string& runtime_dir, uint32_t gpu);
  // Saves what a restart restores (LatencyControl::restore): no latency
  // windows, which a restart starts afresh, and each period's share used
  // to 1e-4. Its digits are the job's to choose (the device time its page
  // reports), and in full they made a GPU of such instances' file larger
  // than load() reads back, losing every instance's memory there.
  static Status save(const std::string& runtime_dir, uint32_t gpu, const slo::SloMemory& memory);
  static Status remove(const std::string& runtime_dir, uint32_t gpu);

 private:
  // To PATH.bad: kept for a look, never read again.
  static void set_aside(const std::string& runtime_dir, uint32_t gpu);
};

}  // namespace egpu::agent
