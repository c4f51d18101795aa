#include "shim/launch_admission.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "core/util/clock.h"
#include "shim/agent_clock.h"
#include "shim/capture_state.h"
#include "shim/fast_clock.h"
#include "shim/gate.h"
#include "shim/log.h"
#include "shim/no_cancel_scope.h"
#include "shim/stream_lookup.h"

namespace egpu::shim {
namespace {

constexpr int64_t kCheckPeriodNs = 10'000'000;    // holder's liveness check
constexpr int64_t kInflightPollNs = 100'000;      // sleep between marker polls
constexpr int64_t kNoProgressNs = 5'000'000'000;  // give up on a stuck estimate

void sleep_ns(int64_t ns) {
  timespec ts{ns / 1'000'000'000, ns % 1'000'000'000};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
}

// The device time this instance's processes measured (the closed-mode duty
// cycle's input).
uint64_t instance_device_ns(const Attachment& a) {
  return shm::attached_device_ns(*a.instance);
}

void stop_duty_cycle(GpuBinding& b) {
  std::lock_guard lock(b.duty_mutex());
  b.duty().stop();
}

// The agent is gone (or restarted and will not take us back): apply the fail
// mode until it returns. With `until_retry`, also until a new agent beats
// and a re-attach is due: true then, and the caller tries it (the launch
// goes only once that succeeded, or the duty cycle lets it).
bool admit_without_agent(GpuBinding& b, const Attachment& a, bool until_retry) {
  const FailMode mode = a.fail_mode();
  if (b.said_agent_gone.first()) {
    if (mode == FailMode::kClosed) {
      log_line(
          "GPU %u: the egpu agent stopped responding; fail mode closed: holding instance "
          "%llu at its share (%u units) locally until it returns",
          b.physical_index(), static_cast<unsigned long long>(a.instance_id),
          shm::slot_units(a.control()));
    } else {
      log_line(
          "GPU %u: the egpu agent stopped responding; fail mode open: running unenforced "
          "until it returns",
          b.physical_index());
    }
  }
  if (mode != FailMode::kClosed) return false;
  const int64_t start = monotonic_ns();
  bool waited = false;
  bool retry = false;
  for (;;) {
    const int64_t now = agent_clock_ns();  // the duty cycle runs on the agent's clock
    // Back; or a new agent, which may take this process back now instead
    // of only when the bucket refills: device time far past the share (a
    // long kernel) would hold it here long after the agent returned.
    if (shm::agent_alive(*a.gpu, now)) {
      if (shm::agent_epoch(*a.gpu) == a.epoch) break;
      if (until_retry && launch_clock_ns() >= b.next_attempt_ns()) {
        retry = true;
        break;
      }
    }
    int64_t wait = 0;
    {
      std::lock_guard lock(b.duty_mutex());
      if (!b.duty().started()) {
        const double share = shm::slot_units(a.control()) / 100.0;
        b.duty().start(share, instance_device_ns(a), now);
      }
      wait = b.duty().wait_ns(instance_device_ns(a), now);
    }
    if (wait <= 0) break;
    if (!waited) {
      a.me.begin_wait();
      waited = true;
    }
    // Poll the markers meanwhile so the device time the bucket reads advances.
    if (!capture_state().events_forbidden()) {
      add_charge(a, b.pacer().poll_all(launch_clock_ns(), thread_token()));
    }
    sleep_on_grant(a, std::min<int64_t>(wait, kMaxFutexWaitNs));
  }
  if (waited) {
    a.me.end_wait();
    a.me.add_throttled(monotonic_ns() - start);
  }
  return retry;
}

}  // namespace

void wait_inflight(GpuBinding& b, const Attachment& a) {
  pacing::DevicePacer& pacer = b.pacer();
  // Its events cannot be queried while a capture forbids it (capture_state.h).
  if (pacer.under_limit() || capture_state().events_forbidden()) return;
  const NoCancelScope no_cancel;
  const uint64_t token = thread_token();
  const int64_t start = launch_clock_ns();
  a.me.begin_wait();
  int64_t last_progress = start;
  int64_t lowest = pacer.queued_ns();
  for (;;) {
    const int64_t now = launch_clock_ns();
    if (capture_state().events_forbidden()) break;  // a capture opened meanwhile
    add_charge(a, pacer.poll_all(now, token));
    sync_inflight_bound(b, a);  // a gang boundary passed: the bound widens again
    const int64_t queued = pacer.queued_ns();
    if (queued < pacer.inflight_limit_ns()) break;
    if (queued < lowest) {
      lowest = queued;
      last_progress = now;
    } else if (now - last_progress > kNoProgressNs) {
      // Never hang a program on our own bookkeeping.
      EGPU_SHIM_LOG_ONCE("GPU %u: in-flight estimate stuck for 5 s; resetting it",
                         b.physical_index());
      pacer.abandon_all();
      break;
    }
    sleep_ns(kInflightPollNs);
  }
  a.me.end_wait();
  a.me.add_throttled(launch_clock_ns() - start);
  publish_inflight(a, pacer.queued_ns());
}

Attachment* admit_launch(ProcessState& s, GpuBinding& b, Attachment* a) {
  const NoCancelScope no_cancel;  // it waits (see NoCancelScope)
  // This call found the process holding the slice (it then waited at the
  // in-flight bound): if the slice moved on to another instance meanwhile,
  // a kick would only cost the agent a wake-up (see wait_for_slice).
  bool held = false;
  bool reattached = false;
  bool retried = false;  // a new agent's re-attach, tried from the fail mode
  for (;;) {
    const int64_t now = launch_clock_ns();
    b.set_next_check_ns(now + kCheckPeriodNs);
    sync_inflight_bound(b, *a);
    const bool restarted = shm::agent_epoch(*a->gpu) != a->epoch;
    if (restarted || !shm::agent_alive(*a->gpu, agent_clock_ns())) {
      // Once per call: an agent that answers the attach but whose page
      // still looks dead (it stopped beating, or its clock is not this
      // process's) gets the fail mode, not a loop of attaches.
      Attachment* fresh = reattached ? a : s.reattach(b, a, now);
      if (fresh != a) {
        a = fresh;
        held = false;  // a new agent knows nothing of it
        reattached = true;
        continue;
      }
      // Held at the share until a new agent may take it back; then once
      // more round the loop to re-attach, held again if that failed.
      if (admit_without_agent(b, *a, /*until_retry=*/!retried)) {
        retried = true;
        reattached = false;
        continue;
      }
      wait_inflight(b, *a);
      return a;
    }
    stop_duty_cycle(b);
    if (a->instance_gone()) {
      // Its step ended (a daemonised child outlives it): the slot may be the
      // next tenant's, whose slices it must not ride on. No share is left.
      b.set_link(Link::kOrphaned);
      b.publish(nullptr);  // unattached from now on (the mapping stays)
      log_line(
          "GPU %u: instance %llu was removed by the egpu agent (its step ended): this "
          "process has no share of the GPU any more; its launches are refused",
          b.physical_index(), static_cast<unsigned long long>(a->instance_id));
      return nullptr;
    }
    if (shm::slice_holder(*a->gpu) == a->gpu_slot) {
      if (b.pacer().under_limit()) return a;
      held = true;
      wait_inflight(b, *a);
      if (shm::slice_holder(*a->gpu) == a->gpu_slot) return a;
      continue;
    }
    // While this process's tail drains, publish what is left of it: the
    // agent starts the next holder once it is (nearly) done.
    const auto drain = [&b, a, last = b.pacer().queued_ns()]() mutable {
      if (!capture_state().events_forbidden()) {
        add_charge(*a, b.pacer().poll_all(launch_clock_ns(), thread_token()));
      }
      const int64_t queued = b.pacer().queued_ns();
      publish_inflight(*a, queued);
      note_tail(*a, last, queued);
      last = queued;
      return queued;
    };
    switch (wait_for_slice(*a, drain, /*kick=*/!held)) {
      case SliceWait::kGranted:
      case SliceWait::kEpochChanged:
      case SliceWait::kAgentDead:
      case SliceWait::kInstanceGone:
        continue;  // the top of the loop sorts out which
    }
  }
}

}  // namespace egpu::shim
