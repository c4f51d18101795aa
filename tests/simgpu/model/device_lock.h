// Holding a simulated device: its robust process-shared mutex, recovery when
// a process died holding it, and bringing its state up to "now".
#pragma once

#include <cstdint>

#include "model/layout.h"

namespace egpu::simgpu {

// How often an advance looks for contexts whose process died.
inline constexpr uint64_t kLivenessIntervalNs = 50'000'000;

class DeviceLock {
 public:
  // Blocks until held. If the previous holder died holding the mutex
  // (EOWNERDEAD), repairs the state first: drops dead processes' contexts and
  // memory, rebuilds derived fields, marks the mutex consistent.
  explicit DeviceLock(DeviceShared& dev);
  // Gives up after timeout_ns (held() is then false).
  DeviceLock(DeviceShared& dev, uint64_t timeout_ns);
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  bool held() const { return held_; }
  bool recovered() const { return recovered_; }

 private:
  void on_acquired(int rc);

  DeviceShared& dev_;
  bool held_ = false;
  bool recovered_ = false;
};

// Retires the context in `slot` and frees its memory.
void retire_and_free(DeviceShared& dev, uint32_t slot, uint64_t now_ns);

// Retires every context whose owner process is gone (other than this one).
void sweep_dead_contexts(DeviceShared& dev, uint64_t now_ns);

// With the lock held: advances the timeline to now_ns, collectives meeting
// on `board` (its lock is taken here, inside the device lock, only while a
// collective is queued), then sweeps dead contexts if forced or the last
// sweep is older than kLivenessIntervalNs. Every process of a segment must
// pass the same board (Segment::board()); nullptr runs collectives as kernels.
void bring_to_now(DeviceShared& dev, uint64_t now_ns, CollectiveBoard* board,
                  bool force_liveness = false);

}  // namespace egpu::simgpu
