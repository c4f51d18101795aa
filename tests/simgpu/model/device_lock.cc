#include "model/device_lock.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "model/board_lock.h"
#include "model/memory_table.h"
#include "model/process_identity.h"
#include "model/timeline.h"

namespace egpu::simgpu {

DeviceLock::DeviceLock(DeviceShared& dev) : dev_(dev) {
  on_acquired(pthread_mutex_lock(&dev_.mutex));
}

DeviceLock::DeviceLock(DeviceShared& dev, uint64_t timeout_ns) : dev_(dev) {
  timespec deadline{};
  ::clock_gettime(CLOCK_REALTIME, &deadline);
  const uint64_t ns = static_cast<uint64_t>(deadline.tv_nsec) + timeout_ns;
  deadline.tv_sec += static_cast<time_t>(ns / 1'000'000'000);
  deadline.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  on_acquired(pthread_mutex_timedlock(&dev_.mutex, &deadline));
}

void DeviceLock::on_acquired(int rc) {
  if (rc == EOWNERDEAD) {
    // The holder died mid-update: every update is ordered so that a prefix
    // of it is harmless, and the derived fields are rebuilt here.
    repair_timeline(dev_.timeline);
    repair_memory(dev_.memory);
    sweep_dead_contexts(dev_, dev_.timeline.now_ns);
    pthread_mutex_consistent(&dev_.mutex);
    recovered_ = true;
    rc = 0;
  }
  held_ = rc == 0;
  if (held_) dev_.lock_holder_pid = current_pid();
}

DeviceLock::~DeviceLock() {
  if (!held_) return;
  dev_.lock_holder_pid = 0;
  pthread_mutex_unlock(&dev_.mutex);
}

void retire_and_free(DeviceShared& dev, uint32_t slot, uint64_t now_ns) {
  const ContextSlot& c = dev.timeline.contexts[slot];
  const uint32_t generation = c.generation;
  retire_context(dev.timeline, slot, now_ns);
  release_owner(dev.memory, static_cast<int32_t>(slot), generation);
}

void sweep_dead_contexts(DeviceShared& dev, uint64_t now_ns) {
  const int32_t self = current_pid();
  for (uint32_t s = 0; s < kMaxContexts; ++s) {
    const ContextSlot& c = dev.timeline.contexts[s];
    if (c.state != static_cast<uint32_t>(ContextState::kActive) || c.owner.pid == self) continue;
    if (!process_alive(c.owner)) retire_and_free(dev, s, now_ns);
  }
  dev.last_liveness_check_ns = now_ns;
}

void bring_to_now(DeviceShared& dev, uint64_t now_ns, CollectiveBoard* board, bool force_liveness) {
  if (board != nullptr && has_queued_collective(dev.timeline)) {
    const BoardLock board_lock(*board);
    // Not held only if the board is unrecoverable (never, as every holder
    // that recovers it marks it consistent): collectives then run alone.
    advance_timeline(dev.timeline, now_ns, board_lock.held() ? board : nullptr);
  } else {
    advance_timeline(dev.timeline, now_ns);
  }
  if (force_liveness || now_ns - dev.last_liveness_check_ns >= kLivenessIntervalNs ||
      now_ns < dev.last_liveness_check_ns) {
    sweep_dead_contexts(dev, dev.timeline.now_ns);
  }
}

}  // namespace egpu::simgpu
