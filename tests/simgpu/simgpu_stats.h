// Reading the simulated GPUs' ground truth: device clock, per-device busy
// time and memory, per-context busy time. For tests and tools (simgpu-stat).
//
//   std::string error;
//   auto reader = egpu::simgpu::StatsReader::open("/simgpu-test", &error);
//   egpu::simgpu::StatsSample a = reader->sample();
//   ... later ...
//   egpu::simgpu::StatsSample b = reader->sample();
//   double share = double(b.busy_ns_of_pid(pid) - a.busy_ns_of_pid(pid)) /
//                  double(b.device_clock_ns - a.device_clock_ns);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace egpu::simgpu {

class Segment;

struct ContextSample {
  int32_t pid = 0;
  uint32_t device = 0;  // physical device index
  uint32_t slot = 0;
  uint32_t generation = 0;
  std::string label;        // SIMGPU_LABEL of the process, else its comm name
  uint64_t busy_ns = 0;     // cumulative device time the context ran
  uint32_t queued_ops = 0;  // ops not yet completed
  bool alive = false;       // false once destroyed or its process died
  uint64_t created_ns = 0;  // device clock
  uint64_t retired_ns = 0;  // device clock; 0 while alive
};

struct DeviceSample {
  uint32_t index = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:1b:00.0"
  uint64_t busy_ns = 0;    // cumulative device time any context ran
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  uint32_t allocations = 0;  // live allocations
};

struct StatsSample {
  uint64_t device_clock_ns = 0;  // CLOCK_MONOTONIC the sample is taken at
  uint64_t timeslice_ns = 0;
  std::vector<DeviceSample> devices;
  std::vector<ContextSample> contexts;  // alive and retired (until their slot is reused)

  // Sums over the contexts of one process / one label (all devices when device < 0).
  uint64_t busy_ns_of_pid(int32_t pid, int device = -1) const;
  uint64_t busy_ns_of_label(const std::string& label, int device = -1) const;
  size_t alive_contexts(int device = -1) const;
};

class StatsReader {
 public:
  // Attaches to an existing segment; nullptr (and *error) if there is none.
  static std::unique_ptr<StatsReader> open(const std::string& shm_name, std::string* error);
  ~StatsReader();
  StatsReader(const StatsReader&) = delete;
  StatsReader& operator=(const StatsReader&) = delete;

  // A consistent sample: takes every device lock (in index order), brings all
  // devices to the same "now" (retiring contexts of dead processes), copies.
  StatsSample sample();

 private:
  explicit StatsReader(std::unique_ptr<Segment> segment);
  std::unique_ptr<Segment> segment_;
};

// SIMGPU_SHM, else /simgpu-<uid>.
std::string segment_name_from_environment();

// shm_unlink; true if it existed.
bool remove_segment(const std::string& shm_name);

std::string format_text(const StatsSample& sample);
std::string format_json(const StatsSample& sample);

}  // namespace egpu::simgpu
