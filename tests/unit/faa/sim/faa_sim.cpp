#include "sim/faa_sim.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace egpu::faa::sim {
namespace {

constexpr InstanceId kFirstId = 100;

SliceScheduler make_scheduler(const Config& config) {
  Result<SliceScheduler> created = SliceScheduler::create(config, 0);
  if (!created.ok()) throw std::invalid_argument(created.error());
  return std::move(created.value());
}

void require(const Status& status) {
  if (!status.ok()) throw std::runtime_error("scheduler refused: " + status.error());
}

}  // namespace

FaaSim::FaaSim(SimOptions options)
    : options_(options), scheduler_(make_scheduler(options.config)) {}

std::size_t FaaSim::add(double target, Mode mode, Workload workload) {
  if (workload.kernel % options_.tick != 0) {
    throw std::invalid_argument("kernel length must be a whole number of ticks");
  }
  Simulated instance;
  instance.id = kFirstId + static_cast<InstanceId>(instances_.size());
  instance.workload = workload;
  instance.next_arrival = now_ + workload.first_burst;  // closed loop: at once
  instance.used_per_tick.assign(static_cast<std::size_t>(now_ / options_.tick), 0);
  require(scheduler_.join(instance.id, target, mode, now_));
  instances_.push_back(std::move(instance));
  return instances_.size() - 1;
}

void FaaSim::remove(std::size_t instance) {
  require(scheduler_.leave(instances_[instance].id, now_));
  instances_[instance].present = false;
  instances_[instance].asking = false;
  instances_[instance].waiting = false;
}

void FaaSim::resize(std::size_t instance, double target, Mode mode) {
  require(scheduler_.resize(instances_[instance].id, target, mode, now_));
}

void FaaSim::submit(std::size_t instance, Nanos work) {
  Simulated& sim = instances_[instance];
  if (sim.workload.endless || sim.workload.think >= 0 || work <= 0) {
    throw std::invalid_argument("submit: an on_demand instance and positive work");
  }
  sim.pending += work;
  sim.requests.push_back({now_, work});
}

std::vector<FaaSim::Completion> FaaSim::take_completions(std::size_t instance) {
  return std::exchange(instances_[instance].completions, {});
}

void FaaSim::serve(Simulated& instance, Nanos use) {
  while (use > 0 && !instance.requests.empty()) {
    Simulated::Request& head = instance.requests.front();
    const Nanos part = std::min(use, head.left);
    head.left -= part;
    use -= part;
    if (head.left > 0) break;
    const Nanos end = now_ + options_.tick;
    instance.completions.push_back({end, end - head.arrival});
    instance.requests.pop_front();
  }
}

void FaaSim::run_until(Nanos end) {
  while (now_ < end)
    step();
}

void FaaSim::step() {
  arrivals();
  update_asking();
  if (now_ - last_charge_ >= options_.charge_period) charge_all();
  const bool overrunning = options_.hold_through_overrun && kernel_left_ > 0 && holder_ &&
                           *holder_ == instances_[kernel_owner_].id && now_ >= grant_until_;
  if (!overrunning) note_grant(scheduler_.decide(now_));
  run_device();
  now_ += options_.tick;
}

void FaaSim::arrivals() {
  for (Simulated& instance : instances_) {
    const Workload& work = instance.workload;
    if (!instance.present || work.endless) continue;
    if (work.think >= 0) {
      if (instance.next_arrival <= now_) {
        instance.pending += work.kernel;
        instance.next_arrival = kNever;  // set again when this kernel ends
      }
      continue;
    }
    if (work.burst_period <= 0) continue;
    while (instance.next_arrival <= now_) {
      instance.pending += work.burst_work;
      instance.next_arrival += work.burst_period;
    }
  }
}

void FaaSim::update_asking() {
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    Simulated& instance = instances_[i];
    if (!instance.present) continue;
    // Blocked on its own running kernel (a synchronize) still counts as asking.
    const bool own_kernel = kernel_left_ > 0 && kernel_owner_ == i;
    const bool want = instance.workload.endless || instance.pending > 0 || own_kernel;
    if (want == instance.asking) continue;
    require(scheduler_.set_asking(instance.id, want, now_));
    instance.asking = want;
    if (want && holder_ != instance.id) {
      instance.waiting = true;
      instance.waiting_since = now_;
    } else if (!want && instance.waiting) {
      instance.longest_wait = std::max(instance.longest_wait, now_ - instance.waiting_since);
      instance.waiting = false;
    }
  }
}

void FaaSim::charge_all() {
  for (Simulated& instance : instances_) {
    if (instance.present && instance.uncharged > 0) {
      require(scheduler_.charge(instance.id, instance.uncharged, now_));
    }
    instance.uncharged = 0;
  }
  last_charge_ = now_;
}

void FaaSim::note_grant(const Grant& grant) {
  const std::optional<InstanceId> previous = holder_;
  const bool new_grant = grant.sequence != sequence_;
  sequence_ = grant.sequence;
  holder_ = grant.holder;
  grant_until_ = grant.until;
  if (previous && previous != holder_) {
    // The previous holder lost the slice while still asking: it waits now.
    Simulated& lost = instances_[*previous - kFirstId];
    if (lost.present && lost.asking) {
      lost.waiting = true;
      lost.waiting_since = now_;
    }
  }
  if (!new_grant || !holder_) return;
  Simulated& granted = instances_[*holder_ - kFirstId];
  if (granted.waiting) {
    granted.longest_wait = std::max(granted.longest_wait, now_ - granted.waiting_since);
    granted.waiting = false;
  }
  granted.grant_times.push_back(now_);
}

void FaaSim::run_device() {
  for (Simulated& instance : instances_)
    instance.used_per_tick.push_back(0);
  if (kernel_left_ == 0 && holder_) {
    const std::size_t owner = *holder_ - kFirstId;
    Simulated& instance = instances_[owner];
    const Nanos work = instance.workload.endless
                           ? instance.workload.kernel
                           : std::min(instance.workload.kernel, instance.pending);
    if (work > 0) {
      if (!instance.workload.endless) instance.pending -= work;
      kernel_owner_ = owner;
      kernel_left_ = work;
    }
  }
  if (kernel_left_ == 0) return;
  const Nanos use = std::min(options_.tick, kernel_left_);
  Simulated& owner = instances_[kernel_owner_];
  owner.used_per_tick.back() += use;
  owner.uncharged += use;
  serve(owner, use);
  kernel_left_ -= use;
  if (kernel_left_ == 0 && owner.workload.think >= 0) {
    owner.next_arrival = now_ + options_.tick + owner.workload.think;
  }
}

Nanos FaaSim::longest_wait(std::size_t instance) const {
  const Simulated& sim = instances_[instance];
  if (!sim.waiting) return sim.longest_wait;
  return std::max(sim.longest_wait, now_ - sim.waiting_since);
}

Nanos FaaSim::used(std::size_t instance, Nanos from, Nanos to) const {
  const std::vector<Nanos>& ticks = instances_[instance].used_per_tick;
  const auto first = static_cast<std::size_t>(std::max<Nanos>(0, from) / options_.tick);
  const auto last = std::min(ticks.size(), static_cast<std::size_t>(to / options_.tick));
  Nanos total = 0;
  for (std::size_t t = first; t < last; ++t)
    total += ticks[t];
  return total;
}

double FaaSim::share(std::size_t instance, Nanos from, Nanos to) const {
  return static_cast<double>(used(instance, from, to)) / static_cast<double>(to - from);
}

Nanos FaaSim::max_window_use(std::size_t instance, Nanos window, Nanos from, Nanos to) const {
  const std::vector<Nanos>& ticks = instances_[instance].used_per_tick;
  const auto width = static_cast<std::size_t>(window / options_.tick);
  const auto first = static_cast<std::size_t>(from / options_.tick);
  const auto last = std::min(ticks.size(), static_cast<std::size_t>(to / options_.tick));
  if (last < first + width) return 0;
  Nanos sum = 0;
  for (std::size_t t = first; t < first + width; ++t)
    sum += ticks[t];
  Nanos best = sum;
  for (std::size_t t = first + width; t < last; ++t) {
    sum += ticks[t] - ticks[t - width];
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace egpu::faa::sim
