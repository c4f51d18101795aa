#include "shim/process_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>

#include "core/protocol/attach_exchange.h"
#include "core/quota/memory_quota.h"
#include "core/shm/gpu_page_io.h"
#include "shim/call_counters.h"
#include "shim/fast_clock.h"
#include "shim/log.h"
#include "shim/no_cancel_scope.h"

namespace egpu::shim {
namespace detail {
constinit std::atomic<ProcessState*> g_process_state{nullptr};
}  // namespace detail

namespace {

constexpr int kAttachTimeoutMs = 2000;
constexpr int64_t kAttachTimeoutNs = int64_t{kAttachTimeoutMs} * 1'000'000;
constexpr int64_t kRetryUnreachableNs = 5'000'000'000;  // agent not there at all
constexpr int64_t kRetryAgentGoneNs = 1'000'000'000;    // restarted or stopped beating
// A failed attempt is followed by none for at least this many times as long
// as it took: against a stalled agent (each attempt waits out
// kAttachTimeoutMs) attempts take at most a fifth of the attempting thread's
// time, while an agent that refuses at once is retried as often as before.
constexpr int64_t kRetryCostFactor = 4;

// When the next attempt may start after one that began at `began` failed.
int64_t next_attempt_after_failure(int64_t began, int64_t retry_ns) {
  const int64_t ended = std::max(began, launch_clock_ns());
  return ended + std::max(retry_ns, kRetryCostFactor * (ended - began));
}

const char* read_env(const char* name) {
  return ::getenv(name);
}

const char* fail_mode_text(const std::optional<FailMode>& mode) {
  if (mode == FailMode::kClosed) {
    return "fail mode closed: launches and allocations are refused until it attaches (retried "
           "every 5 s) - check the egpu agent";
  }
  return "fail mode open: running unenforced until it attaches (retried every 5 s)";
}

}  // namespace

ProcessState* detail::create_process_state() {
  ProcessState* made = nullptr;
  try {
    made = new ProcessState(parse_shim_env(&read_env));
  } catch (...) {
    return nullptr;
  }
  ProcessState* expected = nullptr;
  if (!g_process_state.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
    delete made;  // another thread was first
    return expected;
  }
  // A forked child makes its own (fork_guard.cpp): it is a new process to
  // the agent and must not write into its parent's slots.
  return made;
}

ProcessState::ProcessState(ShimEnv env)
    : env_(std::move(env)), usable_(env_.managed && env_.problem.empty()) {
  set_debug_logging(env_.debug);
  set_call_counting(env_.debug);
  if (!usable_) return;
  pacing::PacingParams params;
  for (size_t i = 0; i < env_.gpu_indices.size(); ++i) {
    bindings_.push_back(
        std::make_unique<GpuBinding>(static_cast<int>(i), env_.gpu_indices[i], backend_, params));
  }
}

void ProcessState::attach_all() {
  if (attached_all_.exchange(true, std::memory_order_acq_rel)) return;
  if (!env_.warning.empty()) log_line("%s", env_.warning.c_str());
  const int64_t now = launch_clock_ns();
  const GpuBinding* stalled = nullptr;
  for (auto& b : bindings_) {
    if (stalled != nullptr) {
      skip_attach(*b, *stalled);
      continue;
    }
    const int64_t began = launch_clock_ns();
    ensure_attached(*b, now);
    // An agent that took its whole timeout to not answer for one GPU would
    // take as long for each of the others: cuInit would wait 2 s per GPU.
    if (b->link() == Link::kUnreachable && b->unanswered() &&
        launch_clock_ns() - began >= kAttachTimeoutNs / 2) {
      stalled = b.get();
    }
  }
}

void ProcessState::skip_attach(GpuBinding& b, const GpuBinding& stalled) {
  std::unique_lock lock(b.attach_mutex(), std::try_to_lock);
  if (!lock.owns_lock() || b.link() != Link::kNeverTried) return;  // another thread's
  b.set_next_attempt_ns(stalled.next_attempt_ns());
  b.set_link(Link::kUnreachable);
  if (b.said_attach_failure.first()) {
    log_line(
        "GPU %u (job %llu step %u): not attached: the egpu agent did not answer for GPU %u; "
        "tried again later; %s",
        b.physical_index(), static_cast<unsigned long long>(env_.job_id), env_.step_id,
        stalled.physical_index(), fail_mode_text(env_.fail_mode));
  }
}

Attachment* ProcessState::attach_slow(GpuBinding& b, int64_t now, Attachment* stale) {
  if (stale == nullptr) {
    // Unattached: attach if never tried, retry now and then an absent agent,
    // and one that said no (a 65th process gets a slot when one is freed; a
    // step may start before its instance is there).
    const Link link = b.link();
    if (link == Link::kOrphaned) return nullptr;
    if ((link == Link::kUnreachable || link == Link::kRefused) && now < b.next_attempt_ns()) {
      return nullptr;
    }
  } else if (now < b.next_attempt_ns()) {
    return stale;
  }
  const NoCancelScope no_cancel;  // connect and poll are cancellation points
  // Only the first attach waits for another thread's: a retry that is
  // already running (up to kAttachTimeoutMs against a stalled agent) is that
  // thread's, and the others go on under the fail mode meanwhile.
  std::unique_lock lock(b.attach_mutex(), std::defer_lock);
  if (b.link() == Link::kNeverTried) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return stale;
  }
  Attachment* current = b.attachment();
  if (current != stale) return current;  // another thread got there first
  if (now < b.next_attempt_ns() && b.link() != Link::kNeverTried) return stale;
  Attachment* fresh = attach_locked(b, now, stale != nullptr);
  return fresh != nullptr ? fresh : stale;
}

Attachment* ProcessState::attach_locked(GpuBinding& b, int64_t now, bool again) {
  const protocol::AttachRequest request{env_.job_id, env_.step_id, b.physical_index()};
  const int64_t began = std::max(now, launch_clock_ns());  // `now` may predate the lock
  auto reply = protocol::request_attach(env_.socket_path, request, kAttachTimeoutMs);
  b.set_unanswered(!reply && reply.failure() == protocol::CallFailure::kUnreachable);
  if (!reply) {
    // From when the attempt ended: one that timed out must not be followed
    // at once by the next (a stalled agent would take every launch's time).
    b.set_next_attempt_ns(
        next_attempt_after_failure(began, again ? kRetryAgentGoneNs : kRetryUnreachableNs));
    if (!again) {
      b.set_link(reply.failure() == protocol::CallFailure::kRefused ? Link::kRefused
                                                                    : Link::kUnreachable);
      if (b.said_attach_failure.first()) {
        log_line("GPU %u (job %llu step %u): cannot attach to the egpu agent at %s: %s; %s",
                 b.physical_index(), static_cast<unsigned long long>(env_.job_id), env_.step_id,
                 env_.socket_path.c_str(), reply.error().c_str(), fail_mode_text(env_.fail_mode));
      }
    } else {
      log_debug("GPU %u: re-attach failed: %s", b.physical_index(), reply.error().c_str());
    }
    return nullptr;
  }
  auto made = make_attachment(std::move(*reply), b.physical_index());
  if (!made) {
    b.set_next_attempt_ns(next_attempt_after_failure(began, kRetryUnreachableNs));
    if (!again) b.set_link(Link::kUnreachable);
    if (b.said_attach_failure.first()) {
      log_line("GPU %u: the egpu agent's pages are unusable: %s; %s", b.physical_index(),
               made.error().c_str(), fail_mode_text(env_.fail_mode));
    }
    return nullptr;
  }
  std::unique_ptr<Attachment> a = std::move(*made);
  a->fail_mode_override = env_.fail_mode;
  // No thread of this image waits yet (waits need the attachment): what
  // the slot counts is an exec'd image's.
  if (!again) a->me.forget_waits();
  // The slot holds what this process has live on the GPU (all of it when the
  // shim ran unattached until now, or the agent lost its pages).
  quota::set_held(a->instance, a->proc_slot, allocations_.live_bytes(b.ordinal()));
  const int64_t limit = shm::inflight_bound(*a->gpu);
  if (limit > 0) b.pacer().set_inflight_limit_ns(limit);
  // Not again within kRetryAgentGoneNs, successful or not: each attachment
  // is kept for good (its mappings and wake socket), so a page that looks
  // dead right after an attach must not have every launch attach again.
  b.set_next_attempt_ns(began + kRetryAgentGoneNs);
  Attachment* raw = a.release();  // kept for the life of the process (see Attachment)
  const Link before = b.link();
  b.publish(raw);
  b.set_link(Link::kAttached);
  b.set_next_check_ns(0);
  if (again) {
    log_line("GPU %u: re-attached to the egpu agent (instance %llu, epoch %llu)",
             b.physical_index(), static_cast<unsigned long long>(raw->instance_id),
             static_cast<unsigned long long>(raw->epoch));
  } else if (before == Link::kUnreachable || before == Link::kRefused) {
    log_line("GPU %u: attached to the egpu agent after all (instance %llu): enforced from now on",
             b.physical_index(), static_cast<unsigned long long>(raw->instance_id));
  } else {
    log_debug("GPU %u: attached: instance %llu, GPU slot %u, process slot %u, epoch %llu",
              b.physical_index(), static_cast<unsigned long long>(raw->instance_id), raw->gpu_slot,
              raw->proc_slot, static_cast<unsigned long long>(raw->epoch));
  }
  return raw;
}

}  // namespace egpu::shim
