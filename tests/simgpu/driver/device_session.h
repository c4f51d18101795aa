// Talking to a simulated device from the driver: run a piece of work with the
// device lock held and the device brought up to now, submit ops (blocking
// like a full pushbuffer when the queue is full), and wait for completion by
// sleeping towards the earliest possible completion, never holding the lock
// while asleep.
#pragma once

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstdint>

#include "driver/driver_state.h"
#include "driver/handles.h"
#include "model/device_lock.h"
#include "model/process_identity.h"

namespace egpu::simgpu::driver {

// Runs fn(DeviceShared&, now_ns) -> CUresult under the device lock, after
// bringing the device to now (and sweeping dead processes if forced or due).
template <class Fn>
CUresult with_device(uint32_t physical, bool force_liveness, Fn&& fn) {
  const Driver& driver = Driver::get();
  DeviceShared& dev = driver.device(physical);
  const DeviceLock lock(dev);
  if (!lock.held()) return CUDA_ERROR_UNKNOWN;
  const uint64_t now = monotonic_ns();
  bring_to_now(dev, now, driver.board(), force_liveness);
  return fn(dev, now);
}

struct SubmitRequest {
  OpKind kind = OpKind::kKernel;
  uint64_t duration_ns = 0;
  uint32_t ref_slot = 0;        // kEventRecord: event slot; kWait: context slot
  uint32_t ref_generation = 0;  // kWait
  uint64_t wait_seq = 0;        // kWait
  uint64_t group = 0;           // kCollective: rendezvous key (never 0)
  uint32_t group_size = 0;      // kCollective: members, at least 2
  bool is_launch = false;       // kernel launches honour the debug stall hook
};

// Appends an op to the stream's context queue; sets *seq (may be null) and the
// stream's and context's last submitted sequence numbers.
CUresult submit(CUstream_st* stream, const SubmitRequest& request, uint64_t* seq);

// Blocks until op `seq` of `ctx` has completed (seq 0: nothing to wait for).
CUresult wait_for_seq(CUctx_st* ctx, uint64_t seq);

// Non-blocking: CUDA_SUCCESS if completed, CUDA_ERROR_NOT_READY otherwise.
CUresult query_seq(CUctx_st* ctx, uint64_t seq);

// Device time at which an event's record op completed (the event must have
// completed); false if its context is gone.
bool read_event_stamp(const CUevent_st* event, uint64_t seq, uint64_t* device_ns);

}  // namespace egpu::simgpu::driver
