// The process-wide driver state: configuration and the shared segment
// (attached by cuInit), the devices this process sees (CUDA_VISIBLE_DEVICES),
// its identity, and the debug stall hook.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/layout.h"
#include "model/segment.h"

namespace egpu::simgpu::driver {

class Driver {
 public:
  // The one instance; never destroyed (threads may call in during exit).
  static Driver& get();

  // cuInit: attaches or creates the segment once; later calls return the
  // first result.
  CUresult initialise();
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  Segment& segment() const { return *segment_; }
  const SegmentConfig& config() const { return segment_->config(); }
  int visible_count() const { return static_cast<int>(visible_.size()); }
  bool valid_ordinal(int ordinal) const { return ordinal >= 0 && ordinal < visible_count(); }
  uint32_t physical_of(int ordinal) const { return visible_[static_cast<size_t>(ordinal)]; }
  int ordinal_of(uint32_t physical) const;
  DeviceShared& device(uint32_t physical) const { return segment_->device(physical); }
  // Where collectives meet: every advance of a device passes it.
  CollectiveBoard* board() const { return &segment_->board(); }

  const ProcessIdentity& self() const { return self_; }
  const std::string& label() const { return label_; }
  int32_t pid() const { return self_.pid; }

  // Where SIMGPU_DEBUG_STALL_IN_DRIVER_MS stalls (SIMGPU_DEBUG_STALL_AT):
  // the first kernel launch (launch, the default; holding the device lock),
  // or the first cuIpcOpenMemHandle (ipc-open; before any lock of the
  // driver's: what the caller holds around it is held meanwhile).
  enum class StallAt { kLaunch, kIpcOpen };
  // True exactly once, for the first such call; then the file
  // SIMGPU_DEBUG_STALL_MARKER names (if set) is created, so a test knows the
  // stall began.
  bool take_stall(StallAt at, uint32_t* stall_ms);

  uint64_t next_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Driver() = default;
  CUresult initialise_locked();
  void parse_visible_devices();
  void map_device_files(const SimConfig& config) const;

  std::mutex init_mutex_;
  std::atomic<bool> ready_{false};
  bool attempted_ = false;
  CUresult init_result_ = CUDA_ERROR_NOT_INITIALIZED;
  std::unique_ptr<Segment> segment_;
  std::vector<uint32_t> visible_;
  ProcessIdentity self_{};
  std::string label_;
  uint32_t stall_ms_ = 0;
  StallAt stall_at_ = StallAt::kLaunch;
  std::string stall_marker_;
  std::atomic<bool> stall_pending_{false};
  std::atomic<uint64_t> next_id_{1};
};

// CUDA_SUCCESS once cuInit succeeded, else CUDA_ERROR_NOT_INITIALIZED.
inline CUresult require_init() {
  return Driver::get().ready() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

// Validates a device ordinal (after require_init).
inline bool valid_device(CUdevice dev) {
  return Driver::get().valid_ordinal(dev);
}

}  // namespace egpu::simgpu::driver
