#include "driver/device_session.h"

#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include "model/timeline.h"

namespace egpu::simgpu::driver {
namespace {

// Below this an op about to complete on the running context is awaited by
// yielding the CPU rather than sleeping (sleep overshoots 55-124 us here).
constexpr uint64_t kSpinBelowNs = 60'000;
// Shortest sleep while another context holds the engine or the bound is unknown.
constexpr uint64_t kMinSleepNs = 50'000;
// Wake this much before the predicted completion, then spin the rest.
constexpr uint64_t kEarlyWakeNs = 60'000;

void sleep_ns(uint64_t ns) {
  thread_local bool slack_set = false;
  if (!slack_set) {
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // finer wakeups for this thread
    slack_set = true;
  }
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::nanosleep(&ts, &ts) != 0) {
  }
}

// Waits roughly `bound_ns` (a lower bound of the time until the awaited op
// can complete) before the caller looks again.
void pause_towards(uint64_t bound_ns, bool awaited_context_running) {
  if (bound_ns <= kSpinBelowNs && awaited_context_running) {
    const uint64_t deadline = monotonic_ns() + bound_ns;
    while (monotonic_ns() < deadline)
      sched_yield();
    return;
  }
  if (bound_ns > kSpinBelowNs) {
    sleep_ns(std::max(bound_ns - kEarlyWakeNs, kMinSleepNs));
    return;
  }
  sleep_ns(kMinSleepNs);
}

}  // namespace

CUresult submit(CUstream_st* stream, const SubmitRequest& request, uint64_t* seq_out) {
  CUctx_st* ctx = stream->ctx;
  Driver& driver = Driver::get();
  DeviceShared& dev = driver.device(ctx->physical);
  Op op{};
  op.kind = static_cast<uint32_t>(request.kind);
  op.remaining_ns = request.duration_ns;
  op.wait_seq = request.wait_seq;
  op.stream_tag = stream->tag;
  op.ref_slot = request.ref_slot;
  op.ref_generation = request.ref_generation;
  op.group = request.group;
  op.group_size = request.group_size;
  for (;;) {
    uint64_t bound_ns = 0;
    bool running = false;
    {
      const DeviceLock lock(dev);
      if (!lock.held()) return CUDA_ERROR_UNKNOWN;
      uint32_t stall_ms = 0;
      if (request.is_launch && driver.take_stall(Driver::StallAt::kLaunch, &stall_ms)) {
        sleep_ns(uint64_t{stall_ms} * 1'000'000);  // test hook: die here holding the lock
      }
      const uint64_t now = monotonic_ns();
      bring_to_now(dev, now, driver.board());
      DeviceTimeline& tl = dev.timeline;
      if (!context_matches(tl, ctx->slot, ctx->generation)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
      ContextSlot& slot = tl.contexts[ctx->slot];
      if (!queue_full(slot)) {
        const uint64_t seq = enqueue_op(tl, ctx->slot, op);
        stream->last_seq.store(seq, std::memory_order_relaxed);
        ctx->last_seq.store(seq, std::memory_order_relaxed);
        if (seq_out != nullptr) *seq_out = seq;
        return CUDA_SUCCESS;
      }
      // Full, like a real pushbuffer: wait for the head op without the lock.
      bound_ns = completion_lower_bound_ns(tl, ctx->slot, slot.completed_seq + 1);
      running = tl.running == static_cast<int32_t>(ctx->slot);
    }
    pause_towards(bound_ns, running);
  }
}

CUresult wait_for_seq(CUctx_st* ctx, uint64_t seq) {
  if (seq == 0) return CUDA_SUCCESS;
  for (;;) {
    bool done = false;
    bool running = false;
    uint64_t bound_ns = 0;
    const CUresult rc = with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t) {
      const DeviceTimeline& tl = dev.timeline;
      if (!context_matches(tl, ctx->slot, ctx->generation)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
      done = seq_completed(tl, ctx->slot, seq);
      if (!done) {
        bound_ns = completion_lower_bound_ns(tl, ctx->slot, seq);
        running = tl.running == static_cast<int32_t>(ctx->slot);
      }
      return CUDA_SUCCESS;
    });
    if (rc != CUDA_SUCCESS || done) return rc;
    pause_towards(bound_ns, running);
  }
}

CUresult query_seq(CUctx_st* ctx, uint64_t seq) {
  if (seq == 0) return CUDA_SUCCESS;
  bool done = false;
  const CUresult rc = with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t) {
    if (!context_matches(dev.timeline, ctx->slot, ctx->generation)) {
      return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    done = seq_completed(dev.timeline, ctx->slot, seq);
    return CUDA_SUCCESS;
  });
  if (rc != CUDA_SUCCESS) return rc;
  return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

bool read_event_stamp(const CUevent_st* event, uint64_t seq, uint64_t* device_ns) {
  const CUctx_st* ctx = event->ctx;
  bool found = false;
  with_device(ctx->physical, false, [&](DeviceShared& dev, uint64_t) {
    if (!context_matches(dev.timeline, ctx->slot, ctx->generation)) return CUDA_SUCCESS;
    const EventStamp& stamp = dev.timeline.contexts[ctx->slot].events[event->stamp_slot];
    if (stamp.seq == seq) {
      *device_ns = stamp.device_ns;
      found = true;
    }
    return CUDA_SUCCESS;
  });
  return found;
}

}  // namespace egpu::simgpu::driver
