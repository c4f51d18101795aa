// SliceScheduler: statistics for `egpuctl status` and metrics.
#include <algorithm>

#include "core/faa/slice_scheduler.h"

namespace egpu::faa {

Result<InstanceStats> SliceScheduler::stats(InstanceId id, Nanos now) const {
  const Result<std::size_t> found = find(id, "report");
  if (!found.ok()) return Error{found.error()};
  const std::size_t index = found.value();
  const InstanceState& instance = instances_[index];
  InstanceStats out;
  out.id = instance.id;
  out.target = instance.target;
  out.mode = instance.mode;
  out.achieved = clock_.to_true_at(instance.device, now) / tau_;
  out.deviation = clock_.to_true_at(instance.used, now) / tau_ - instance.target;
  out.asking = instance.asking;
  out.holding = holder_ == index;
  out.charged = instance.charged_total;
  out.throttled = instance.throttled;
  out.longest_wait = instance.longest_wait;
  if (instance.asking && !out.holding) {
    const Nanos waiting = std::max<Nanos>(0, now - instance.waiting_since);
    out.throttled += waiting;
    out.longest_wait = std::max(out.longest_wait, waiting);
  }
  out.grants = instance.grants;
  if (instance.mode == Mode::kCap) out.cap_tokens = instance.bucket.tokens(now);
  return out;
}

GpuStats SliceScheduler::gpu_stats(Nanos now) const {
  GpuStats out;
  if (holder_ != kNone) {
    out.holder = instances_[holder_].id;
    out.holder_since = grant_start_;
    out.holder_until = grant_end_;
  }
  out.utilisation = clock_.to_true_at(busy_, now) / tau_;
  out.allocated = allocated_;
  out.instances = instances_.size();
  out.asking = static_cast<std::size_t>(std::count_if(
      instances_.begin(), instances_.end(), [](const InstanceState& i) { return i.asking; }));
  out.grants = grants_;
  out.preemptions = preemptions_;
  return out;
}

}  // namespace egpu::faa
