// SliceScheduler: who holds the slice, and until when.
//
// 1. The preferred next holder is the asking, eligible instance with the lowest
//    sawtooth-corrected deviation (grant_order.h); ties go to the one waiting
//    longest, then to the lowest id (its slot: what a restart rebuilds).
// 2. Anti-starvation: giving it the slice must leave every other waiting
//    instance able to start by its wait deadline, ceil(1/target) + 1 slices
//    after it began waiting (deadline_check.h); if not, the earliest deadline
//    goes first. Lowest deviation alone misses that bound in most random target
//    sets (by up to ~4 slices); with this rule every named split meets it and
//    random sets of 2-16 instances miss it rarely, by at most 2 slices (the
//    check looks one decision ahead; an exact guarantee is a pinwheel
//    scheduling problem, not attempted here).
// 3. A holder keeps the slice to its end unless it stops asking, leaves, or an
//    instance that started asking during the grant is preempt_threshold below
//    it (after min_hold).
// 4. Overdue takeover: a grant won on order ends early (after min_hold) once an
//    instance already waiting when it began has a key that has decayed below
//    the holder's key at grant start, i.e. once the waiter would have won had
//    it been that overdue when the grant began. Deciding only at slice ends made such a waiter
//    start up to a slice late every time: an instance with long grants between another's runs of
//    slices (a 20 ms kernel against short kernels, 40/60) came out about 1.5 pp short. In a steady
//    rotation the waiter reaches that key exactly at the slice end, so whole slices stay whole.
// 5. Burst instances are always eligible; cap instances only with at least
//    min_cap_grant in their token bucket, and never for longer than it holds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/faa/slice_scheduler.h"

namespace egpu::faa {
namespace {

// The best candidate so far by one key; ties go to the one waiting longest,
// then to the lowest id. Not to the first offered: the order of instances_
// changes as instances leave (the last takes the leaver's place) and a
// restarted agent rebuilds it in slot order, so the same state would break
// the same tie two ways.
template <typename Key>
struct Pick {
  std::size_t index = std::numeric_limits<std::size_t>::max();
  Key key = std::numeric_limits<Key>::max();
  Nanos waiting_since = kNever;
  InstanceId id = std::numeric_limits<InstanceId>::max();

  void offer(std::size_t candidate, const InstanceState& state, Key candidate_key) {
    const auto mine = std::tie(candidate_key, state.waiting_since, state.id);
    if (mine < std::tie(key, waiting_since, id)) {
      index = candidate;
      key = candidate_key;
      waiting_since = state.waiting_since;
      id = state.id;
    }
  }
};

}  // namespace

double SliceScheduler::deviation(const InstanceState& instance) const {
  return clock_.to_true(instance.used) / tau_ - instance.target;
}

double SliceScheduler::relative_deviation(const InstanceState& instance) const {
  const double utilisation = clock_.to_true(busy_ + joined_history_) / tau_;
  // Below a few percent of use there is nothing meaningful to rescale.
  if (utilisation < 0.05 || allocated_ <= 0.0) return deviation(instance);
  return clock_.to_true(instance.used) / tau_ * (allocated_ / utilisation) - instance.target;
}

inline bool SliceScheduler::eligible(const InstanceState& instance, Nanos now) const {
  return instance.mode == Mode::kBurst || instance.bucket.holds(config_.min_cap_grant, now);
}

double SliceScheduler::order_key(const InstanceState& instance) const {
  return (clock_.to_true(instance.used) + static_cast<double>(instance.pending)) *
         instance.order_weight;
}

SliceScheduler::Waiter SliceScheduler::lowest_waiter(Nanos now) const {
  Pick<double> lowest;
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    const InstanceState& candidate = instances_[i];
    if (i == holder_ || !candidate.asking || !eligible(candidate, now)) continue;
    // Those that started asking during the grant may only preempt (rule 3).
    if (holder_ != kNone && candidate.asking_since > grant_start_) continue;
    lowest.offer(i, candidate, order_key(candidate));
  }
  return Waiter{lowest.index, lowest.key};
}

void SliceScheduler::start_grant(std::size_t index, Nanos now) {
  InstanceState& instance = instances_[index];
  instance.usage_this_grant = 0;
  const Nanos waited = std::max<Nanos>(0, now - instance.waiting_since);
  instance.throttled += waited;
  instance.longest_wait = std::max(instance.longest_wait, waited);
  ++instance.grants;
  ++grants_;
  holder_ = index;
  grant_start_ = now;
  // Only a holder continuing into another slice, on order, may be taken over:
  // a grant given for a wait deadline must run (or the deadline rule would be
  // undone a min_hold later), and taking over first grants too cut rotations
  // short and put random target sets off their shares. No waiter: key = max.
  grant_key_ = order_key(instance);
  takeover_ = index == previous_holder_ && lowest_waiter(now).key >= grant_key_;
  previous_holder_ = index;
  Nanos length = config_.slice;
  // A cap grant never outlasts its tokens: usage over any window stays within
  // target * window + one slice.
  if (instance.mode == Mode::kCap) length = std::min(length, instance.bucket.tokens(now));
  grant_end_ = now + length;
}

void SliceScheduler::end_grant(Nanos now) {
  instances_[holder_].waiting_since = now;
  holder_ = kNone;
}

inline Nanos SliceScheduler::wait_deadline(const InstanceState& instance) const {
  const Nanos deadline = instance.waiting_since + instance.patience;
  // The bound assumes grants of one slice. Device time charged beyond that
  // (kernels that overran their slice) is owed to the others first: at the
  // instance's target rate, overrun / target of extra waiting.
  if (instance.usage_this_grant <= config_.slice) return deadline;
  const auto overrun = static_cast<double>(instance.usage_this_grant - config_.slice);
  return deadline + static_cast<Nanos>(overrun / instance.target);
}

std::size_t SliceScheduler::next_holder(Nanos now) {
  Pick<double> lowest;
  Pick<Nanos> earliest;
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    const InstanceState& candidate = instances_[i];
    if (!candidate.asking || !eligible(candidate, now)) continue;
    lowest.offer(i, candidate, order_key(candidate));
    earliest.offer(i, candidate, wait_deadline(candidate));
  }
  const std::size_t preferred = lowest.index;
  if (preferred == kNone || preferred == earliest.index) return preferred;
  // Anti-starvation. Someone else must start before the next slot: no choice.
  if (earliest.key < now + config_.slice) return earliest.index;
  // Otherwise: if the preferred one takes this slice (and waits again from its
  // end), can everyone else still start by their deadlines?
  deadlines_.begin(now, config_.slice);
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    const InstanceState& candidate = instances_[i];
    if (!candidate.asking || !eligible(candidate, now)) continue;
    const Nanos period = config_.slice + candidate.patience;
    deadlines_.add(i == preferred ? now + period : wait_deadline(candidate), period);
  }
  return deadlines_.feasible() ? preferred : earliest.index;
}

std::size_t SliceScheduler::preemptor(Nanos now) const {
  const double bar = relative_deviation(instances_[holder_]) - config_.preempt_threshold;
  Pick<double> lowest;
  for (std::size_t i = 0; i < instances_.size(); ++i) {
    const InstanceState& candidate = instances_[i];
    // Only instances that started asking during this grant: the others already
    // lost this decision and wait for the slice end.
    if (i == holder_ || !candidate.asking || candidate.asking_since <= grant_start_) continue;
    if (!eligible(candidate, now)) continue;
    const double d = relative_deviation(candidate);
    if (d <= bar) lowest.offer(i, candidate, d);
  }
  return lowest.index;
}

Nanos SliceScheduler::overdue_takeover_at(Nanos now, const Waiter& waiter) const {
  if (waiter.index == kNone) return kNever;
  const double key = waiter.key;
  const Nanos earliest = grant_start_ + config_.min_hold;
  if (key < grant_key_) return std::max(now, earliest);
  // A waiter's key decays as e^(-t/tau) while it is not charged: it crosses
  // the holder's starting key after tau * ln(key / start key). A later charge
  // or a new asker re-decides; the agent also polls while others wait.
  if (grant_key_ <= 0.0) return kNever;
  const double wait = tau_ * std::log(key / grant_key_);
  if (wait >= static_cast<double>(grant_end_ - now)) return kNever;
  return std::max(now + static_cast<Nanos>(wait) + 1, earliest);
}

Nanos SliceScheduler::grant_until(Nanos now) const {
  return takeover_ ? std::min(grant_end_, overdue_takeover_at(now, lowest_waiter(now)))
                   : grant_end_;
}

Nanos SliceScheduler::next_cap_ready(Nanos now) const {
  Nanos ready = kNever;
  for (const InstanceState& instance : instances_) {
    if (!instance.asking || instance.mode != Mode::kCap) continue;
    ready = std::min(ready, instance.bucket.ready_at(config_.min_cap_grant, now));
  }
  return ready;
}

Grant SliceScheduler::current_grant(Nanos until) const {
  Grant grant;
  if (holder_ != kNone) grant.holder = instances_[holder_].id;
  grant.until = until;
  grant.sequence = grants_;
  return grant;
}

Grant SliceScheduler::handover_done(InstanceId previous, Nanos now) {
  advance(now);
  now = clock_.now();
  if (const auto old = index_.find(previous); old != index_.end()) {
    InstanceState& before = instances_[old->second];
    if (old->second != holder_ && before.waiting_since < now) {
      // Its wait counts from the drain's end (the drain was its own tail),
      // but what stats already showed of it stays shown: counters that
      // status and metrics report never go back.
      if (before.asking) {
        const Nanos shown = now - before.waiting_since;
        before.throttled += shown;
        before.longest_wait = std::max(before.longest_wait, shown);
      }
      before.waiting_since = now;
    }
  }
  if (holder_ == kNone) return decide(now);
  const Nanos drained = std::max<Nanos>(0, now - grant_start_);
  instances_[holder_].throttled += drained;
  grant_end_ += drained;
  grant_start_ = now;
  return current_grant(grant_until(now));
}

Grant SliceScheduler::decide(Nanos now) {
  advance(now);
  now = clock_.now();
  if (holder_ != kNone && now >= grant_end_) end_grant(now);
  Nanos takeover_at = kNever;
  if (holder_ != kNone && takeover_) {
    const Waiter waiter = lowest_waiter(now);
    takeover_at = overdue_takeover_at(now, waiter);
    if (takeover_at <= now) {
      // Straight to the overdue waiter: a fresh decision could pick the
      // holder again, whose key dips while its new grant's usage is small.
      end_grant(now);
      start_grant(waiter.index, now);
      return current_grant(grant_until(now));
    }
  }
  if (holder_ != kNone) {
    const std::size_t challenger = preemptor(now);
    if (challenger == kNone) return current_grant(std::min(grant_end_, takeover_at));
    const Nanos hold_until = grant_start_ + config_.min_hold;
    if (now < hold_until) return current_grant(std::min(grant_end_, hold_until));
    ++preemptions_;
    end_grant(now);
    start_grant(challenger, now);
    return current_grant(grant_until(now));
  }
  const std::size_t next = next_holder(now);
  if (next == kNone) return current_grant(next_cap_ready(now));
  start_grant(next, now);
  return current_grant(grant_until(now));
}

}  // namespace egpu::faa
