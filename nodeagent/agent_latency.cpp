// The agent's latency control: its periodic timer, and keeping each GPU's
// control across an agent restart (SloMemoryFile).
#include <algorithm>

#include "core/util/clock.h"
#include "core/util/log.h"
#include "nodeagent/agent.h"
#include "nodeagent/slo_memory_file.h"

namespace egpu::agent {
namespace {

// Every 5 s: what the model learnt meanwhile is all a crash loses.
constexpr int kSaveEveryPeriods = 50;

}  // namespace

void Agent::restore_latency_control(uint32_t gpu) {
  auto memory = SloMemoryFile::load(config_.runtime_dir, gpu);
  if (!memory) {
    EGPU_LOG_WARN("GPU %u: the latency control starts afresh: %s", gpu, memory.error().c_str());
    return;
  }
  if (!*memory) return;
  latency_.restore(gpu, **memory, *registry_);
  if (!latency_.wanted(gpu, *registry_)) {
    // Nothing of it is here any more: a stale file must not meet a reused id.
    latency_.forget(gpu);
    latency_saver_.remove(gpu);
    return;
  }
  EGPU_LOG_INFO(
      "GPU %u: the latency control goes on with %zu loan(s) and %zu instance(s) of the "
      "previous agent",
      gpu, latency_.loans(gpu).size(), latency_.memory(gpu).instances.size());
}

void Agent::save_latency_control(uint32_t gpu) {
  if (!latency_.wanted(gpu, *registry_)) return;
  // Written on a worker (LatencyMemorySaver): what failed is said at a
  // later save. Control goes on; a restart would start it afresh. Saves
  // come with loan changes, which a job can make a few a second, and fail
  // while RuntimeDir is full: once a minute.
  latency_saver_.save(gpu, latency_.memory(gpu));
  if (const auto failure = latency_saver_.take_failure()) {
    if (const auto v = latency_save_log_.take(monotonic_ns()); v.log) {
      EGPU_LOG_WARN("cannot keep the latency control's memory: %s%s", failure->c_str(),
                    dropped_note(v).c_str());
    }
  }
  latency_.mark_saved(gpu);
}

void Agent::schedule_latency_control() {
  if (latency_timer_on_ || !latency_timer_) return;
  bool wanted = false;
  for (uint32_t gpu = 0; gpu < arbiters_.size(); ++gpu)
    wanted = wanted || latency_.wanted(gpu, *registry_);
  if (!wanted) return;
  timeval period{0, static_cast<suseconds_t>(LatencyControl::kPeriodNs / 1000)};
  if (event_add(latency_timer_.get(), &period) != 0) {
    EGPU_LOG_WARN("cannot start the latency control's timer; objectives are not acted on");
    return;
  }
  latency_timer_on_ = true;
  latency_last_ns_ = monotonic_ns();
}

void Agent::on_latency_timer(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<Agent*>(arg);
  const int64_t now = monotonic_ns();
  // The period as it was: a late timer must not make a period's device
  // time look like more than the GPU had.
  const int64_t period = std::max<int64_t>(now - self->latency_last_ns_, 1'000'000);
  self->latency_last_ns_ = now;
  bool wanted = false;
  for (uint32_t gpu = 0; gpu < self->arbiters_.size(); ++gpu) {
    if (!self->latency_.wanted(gpu, *self->registry_)) {
      if (self->latency_.forget(gpu)) self->latency_saver_.remove(gpu);
      continue;
    }
    wanted = true;
    const bool changed = self->latency_.step(
        gpu, *self->registry_,
        [self](const model::Instance& inst) -> const InstanceRuntime* {
          return inst.gpu < self->arbiters_.size() ? self->arbiters_[inst.gpu]->runtime(inst.id)
                                                   : nullptr;
        },
        [self](const model::Instance& inst) -> uint64_t {
          return inst.gpu < self->arbiters_.size() ? self->arbiters_[inst.gpu]->waited_ns(inst.id)
                                                   : 0;
        },
        period);
    // Loans at once (a restart must not drop them), the rest now and then;
    // written on a worker, so a crash right after a change may miss it.
    if (changed || self->latency_.periods_unsaved(gpu) >= kSaveEveryPeriods)
      self->save_latency_control(gpu);
    if (!changed) continue;
    if (Status s = self->retarget(gpu); !s) {
      EGPU_LOG_WARN("GPU %u: cannot apply the latency control's shares: %s", gpu,
                    s.error().c_str());
    }
    self->tick(gpu);
  }
  if (!wanted) {
    event_del(self->latency_timer_.get());
    self->latency_timer_on_ = false;
  }
}

}  // namespace egpu::agent
