// SliceScheduler: membership, asking and charging. Decisions are in
// slice_scheduler_decide.cpp, statistics in slice_scheduler_stats.cpp.
#include "core/faa/slice_scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/faa/grant_order.h"

namespace egpu::faa {
namespace {

// Rounding slack when checking that targets add up to at most the whole GPU.
constexpr double kShareEpsilon = 1e-9;

std::string describe(InstanceId id) {
  return "instance " + std::to_string(id);
}

}  // namespace

Result<SliceScheduler> SliceScheduler::create(const Config& config, Nanos now) {
  if (Status valid = config.validate(); !valid.ok()) {
    return Error{"invalid FAA config: " + valid.error()};
  }
  return SliceScheduler(config, now);
}

// The decayed elapsed time N of the GPU is taken to start at its steady state
// tau (as if the GPU had always been observed), and then stays tau for ever:
// achieved share = decayed used / tau. So a scheduler created just before its
// instances behaves exactly like one that ran for hours.
SliceScheduler::SliceScheduler(const Config& config, Nanos now)
    : config_(config), clock_(config.tau, now), tau_(static_cast<double>(config.tau)) {}

Result<std::size_t> SliceScheduler::find(InstanceId id, const char* action) const {
  const auto found = index_.find(id);
  if (found == index_.end()) {
    return Error{std::string("cannot ") + action + " " + describe(id) +
                 ": no such instance on this GPU"};
  }
  return found->second;
}

Status SliceScheduler::check_target(double target, double others) const {
  if (!std::isfinite(target) || target <= 0.0 || target > 1.0) {
    return Error{"target share " + std::to_string(target) +
                 " is out of range: it must be in (0, 1] (units / 100)"};
  }
  if (others + target > 1.0 + kShareEpsilon) {
    return Error{"target share " + std::to_string(target) +
                 " does not fit: " + std::to_string(others) + " of this GPU is already allocated"};
  }
  return Status::Ok();
}

void SliceScheduler::advance(Nanos now) {
  const double factor = clock_.advance(now);
  if (factor == 1.0) return;
  for (InstanceState& instance : instances_) {
    instance.used *= factor;
    instance.credited *= factor;
    instance.device *= factor;
  }
  busy_ *= factor;
  joined_history_ *= factor;
}

void SliceScheduler::set_order_weight(InstanceState& instance) const {
  instance.order_weight =
      1.0 / pre_grant_share(instance.target, instance.usage_per_grant, config_.tau);
}

void SliceScheduler::set_patience(InstanceState& instance) const {
  // The bound FAA aims at: with everyone asking and using whole slices, an
  // instance with share s waits at most ceil(1/s) + 1 slices between grants.
  const auto slices = static_cast<Nanos>(std::ceil(1.0 / instance.target - kShareEpsilon)) + 1;
  instance.patience = slices * config_.slice;
}

Status SliceScheduler::join(InstanceId id, double target, Mode mode, Nanos now) {
  mode = time_slicing(mode);
  if (index_.contains(id)) {
    return Error{"cannot join " + describe(id) + ": it is already on this GPU"};
  }
  if (Status fits = check_target(target, allocated_); !fits.ok()) {
    return Error{"cannot join " + describe(id) + ": " + fits.error()};
  }
  advance(now);
  InstanceState& instance = instances_.emplace_back(id, target, mode, config_.slice, now);
  // Deviation 0: the decayed usage of an instance that always ran at target.
  // Relative deviations count the same history as busy time, or they would
  // start inflated by 1 / utilisation on a fresh GPU and set off preemptions
  // between instances that are all at their targets.
  instance.used = target * tau_ * clock_.scale();
  instance.credited = instance.used;
  joined_history_ += instance.used;
  set_order_weight(instance);
  set_patience(instance);
  deadlines_.reserve(instances_.size());
  index_.emplace(id, instances_.size() - 1);
  allocated_ += target;
  return Status::Ok();
}

Status SliceScheduler::leave(InstanceId id, Nanos now) {
  const Result<std::size_t> found = find(id, "remove");
  if (!found.ok()) return Error{found.error()};
  advance(now);
  const std::size_t index = found.value();
  if (holder_ == index) holder_ = kNone;
  if (previous_holder_ == index) previous_holder_ = kNone;
  if (sole_ == index) sole_ = kNone;
  allocated_ = std::max(0.0, allocated_ - instances_[index].target);
  // Its credit goes with it: what it really used stays in busy_. Steps
  // coming and going must not pile up utilisation nobody had.
  joined_history_ -= instances_[index].credited;
  index_.erase(id);
  const std::size_t last = instances_.size() - 1;
  if (index != last) {
    instances_[index] = std::move(instances_[last]);
    index_[instances_[index].id] = index;
    if (holder_ == last) holder_ = index;
    if (previous_holder_ == last) previous_holder_ = index;
    if (sole_ == last) sole_ = index;
  }
  instances_.pop_back();
  track_sole_asker(now);
  return Status::Ok();
}

Status SliceScheduler::resize(InstanceId id, double target, Mode mode, Nanos now) {
  mode = time_slicing(mode);
  const Result<std::size_t> found = find(id, "resize");
  if (!found.ok()) return Error{found.error()};
  InstanceState& instance = instances_[found.value()];
  if (Status fits = check_target(target, allocated_ - instance.target); !fits.ok()) {
    return Error{"cannot resize " + describe(id) + ": " + fits.error()};
  }
  advance(now);
  allocated_ += target - instance.target;
  if (mode == Mode::kCap && instance.mode == Mode::kCap) {
    instance.bucket.set_rate(target, now);
  } else if (mode == Mode::kCap) {
    instance.bucket = TokenBucket(target, config_.slice, now);
    instance.usage_per_grant = config_.slice;
  }
  // The deviation (used / tau - target) is kept: a resize counts from now
  // on. Kept as it was, a grown instance got its new share's worth of
  // history back from its neighbours, which a job flipping units between
  // two of its own steps could repeat at will; a shrunk one stalled until
  // its history decayed. Not clamped at 0: a shrink then a grow (a loan
  // lent and given back, an umbrella's step come and gone) must leave the
  // deviation as it was, or an idle instance would gain usage it never had.
  const double credit = (target - instance.target) * tau_ * clock_.scale();
  instance.used += credit;
  instance.credited += credit;
  joined_history_ += credit;
  if (sole_ == found.value()) sole_start_used_ += clock_.to_true(credit);
  instance.target = target;
  instance.mode = mode;
  set_order_weight(instance);
  set_patience(instance);
  return Status::Ok();
}

Status SliceScheduler::set_asking(InstanceId id, bool asking, Nanos now) {
  const Result<std::size_t> found = find(id, "update");
  if (!found.ok()) return Error{found.error()};
  const std::size_t index = found.value();
  InstanceState& instance = instances_[index];
  if (asking == instance.asking) return Status::Ok();
  instance.asking = asking;
  track_sole_asker(now);
  if (asking) {
    instance.asking_since = now;
    instance.waiting_since = now;
    return Status::Ok();
  }
  if (holder_ == index) {
    // Early yield: the rest of the slice goes to the next decision.
    holder_ = kNone;
    return Status::Ok();
  }
  const Nanos waited = std::max<Nanos>(0, now - instance.waiting_since);
  instance.throttled += waited;
  instance.longest_wait = std::max(instance.longest_wait, waited);
  return Status::Ok();
}

// Work conservation without debt, as CFS places a task that wakes on a busy
// CPU: an instance that asked alone for a while (a job that started first,
// or ran while its neighbours were idle) used capacity nobody wanted. When
// that stretch ends, its usage is lowered to what running exactly at its
// target over the stretch would have left, so newcomers do not find it far
// above target and shut it out until that decays. Only stretches of a
// quarter of tau or more: the gaps of a sync-heavy neighbour (which leave
// the holder alone briefly) are part of sharing, not idle capacity. The
// sole asker cannot make itself alone: that takes the others not asking.
void SliceScheduler::track_sole_asker(Nanos now) {
  std::size_t askers = 0;
  std::size_t only = kNone;
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    if (instances_[i].asking) {
      ++askers;
      only = i;
    }
  }
  const std::size_t sole = askers == 1 ? only : kNone;
  if (sole == sole_) return;
  advance(now);
  if (sole_ != kNone && now - sole_since_ >= config_.tau / 4) {
    InstanceState& alone = instances_[sole_];
    const double decay = std::exp(-static_cast<double>(now - sole_since_) / tau_);
    const double at_target = sole_start_used_ * decay + alone.target * tau_ * (1.0 - decay);
    const double used = clock_.to_true(alone.used);
    if (used > at_target) alone.used -= (used - at_target) * clock_.scale();
  }
  sole_ = sole;
  sole_since_ = now;
  if (sole != kNone) sole_start_used_ = clock_.to_true(instances_[sole].used);
}

Status SliceScheduler::charge(InstanceId id, Nanos device_time, Nanos now) {
  const Result<std::size_t> found = find(id, "charge");
  if (!found.ok()) return Error{found.error()};
  if (device_time < 0) {
    return Error{"cannot charge " + describe(id) + " a negative device time (" +
                 std::to_string(device_time) + " ns)"};
  }
  advance(now);
  InstanceState& instance = instances_[found.value()];
  const double scaled = static_cast<double>(device_time) * clock_.scale();
  instance.used += scaled;
  instance.device += scaled;
  busy_ += scaled;
  instance.charged_total += device_time;
  instance.usage_this_grant += device_time;
  // Its latest grant's usage sets the share jump its pre-grant level must
  // match. A cap instance's grants are cut by its tokens, not by its demand:
  // it keeps the full-slice level, or short grants would pull it ahead.
  if (instance.mode == Mode::kBurst) {
    instance.usage_per_grant = instance.usage_this_grant;
    set_order_weight(instance);
  }
  if (instance.mode == Mode::kCap) instance.bucket.spend(device_time, now);
  return Status::Ok();
}

Status SliceScheduler::set_pending(InstanceId id, Nanos pending, Nanos now) {
  const Result<std::size_t> found = find(id, "update");
  if (!found.ok()) return Error{found.error()};
  if (pending < 0) {
    return Error{"cannot set " + describe(id) + " a negative pending device time (" +
                 std::to_string(pending) + " ns)"};
  }
  advance(now);
  instances_[found.value()].pending = pending;
  return Status::Ok();
}

}  // namespace egpu::faa
