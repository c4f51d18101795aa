#include "core/faa/arbiter_policy.h"

#include <algorithm>

namespace egpu::faa {

namespace {

// Charges lag the work by up to the in-flight bound plus a marker interval;
// credit up to this much covers that lag.
constexpr Nanos kMaxChargeCreditNs = 50 * kMillisecond;
// A tick later than the policy asked for is the agent's own stall (stopped,
// its host stalled), during which the jobs ran under their fail mode: at most
// this much of the lateness counts as held.
constexpr Nanos kMaxHeldPerTickNs = 20 * kMillisecond;

}  // namespace

std::vector<Nanos> trim_overcharge(const std::vector<Nanos>& charges, Nanos* credit_ns) {
  std::vector<Nanos> out(charges.size());
  Nanos total = 0;
  for (std::size_t i = 0; i < charges.size(); ++i) {
    out[i] = std::max<Nanos>(charges[i], 0);
    // Saturating: the reports are the jobs' to write.
    total = out[i] > INT64_MAX - total ? INT64_MAX : total + out[i];
  }
  const Nanos credit = std::max<Nanos>(*credit_ns, 0);
  if (total <= credit) {
    *credit_ns = credit - total;
    return out;
  }
  // Water-filling from the top: every charge is cut to one level, the one
  // at which they add up to the credit. Charges below it stand; a report of
  // more than passed is paid for by whoever made it, never by neighbours
  // that reported what they used.
  std::vector<Nanos> ascending = out;
  std::sort(ascending.begin(), ascending.end());
  Nanos left = credit;
  Nanos level = 0;
  std::size_t extra = 0;  // capped charges that get one ns more (the division's remainder)
  for (std::size_t k = 0; k < ascending.size(); ++k) {
    const auto above = static_cast<Nanos>(ascending.size() - k);
    if (ascending[k] <= left / above) {
      left -= ascending[k];
      continue;
    }
    level = left / above;
    extra = static_cast<std::size_t>(left % above);
    break;
  }
  for (Nanos& c : out) {
    if (c <= level) continue;
    c = level + (extra > 0 ? 1 : 0);
    if (extra > 0) --extra;
  }
  *credit_ns = 0;
  return out;
}

Nanos inflight_bound(const PolicySettings& settings, std::size_t with_processes, bool all_burst) {
  if (settings.inflight_alone_ns > 0 && with_processes <= 1 && all_burst) {
    return std::max(settings.inflight_alone_ns, settings.inflight_limit_ns);
  }
  return settings.inflight_limit_ns;
}

Result<ArbiterPolicy> ArbiterPolicy::create(const PolicySettings& settings, Nanos now) {
  auto scheduler = SliceScheduler::create(settings.faa, now);
  if (!scheduler.ok()) return Error{scheduler.error()};
  ArbiterPolicy policy(settings, std::move(scheduler.value()));
  policy.last_tick_ns_ = now;
  return policy;
}

ArbiterPolicy::ArbiterPolicy(const PolicySettings& settings, SliceScheduler scheduler)
    : settings_(settings),
      scheduler_(std::move(scheduler)),
      inflight_bound_ns_(settings.inflight_limit_ns) {}

Status ArbiterPolicy::join(InstanceId id, double target, Mode mode, Nanos now) {
  if (Status s = scheduler_.join(id, target, mode, now); !s.ok()) return s;
  Member m;
  m.target = target;
  m.mode = mode;
  m.last_activity = now;
  m.floor = HeldTimeFloor(settings_.floor);
  members_.emplace(id, m);
  update_inflight_bound(now);
  return {};
}

void ArbiterPolicy::leave(InstanceId id, Nanos now) {
  (void)scheduler_.leave(id, now);
  if (const auto it = members_.find(id); it != members_.end() && it->second.gang) {
    grants_->leave(it->second.gang->gang, {gpu_, id});
  }
  members_.erase(id);
  if (successor_ == id) successor_.reset();  // the drain ends; the next tick decides afresh
  if (published_ == id) {
    published_.reset();
    slice_end_ns_ = 0;
  }
  if (!successor_ || !published_) drain_until_ns_ = 0;
  update_inflight_bound(now);
}

Status ArbiterPolicy::retarget(const std::map<InstanceId, std::pair<double, Mode>>& targets,
                               Nanos now) {
  // Two passes: shrinking first keeps the sum of targets within the GPU.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [id, tm] : targets) {
      auto it = members_.find(id);
      if (it == members_.end()) continue;
      const bool shrink = tm.first <= it->second.target;
      if ((pass == 0) != shrink) continue;
      if (Status s = scheduler_.resize(id, tm.first, tm.second, now); !s.ok()) return s;
      it->second.target = tm.first;
      it->second.mode = tm.second;
    }
  }
  update_inflight_bound(now);
  return {};
}

void ArbiterPolicy::set_processes(InstanceId id, uint32_t processes, Nanos now) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  it->second.processes = processes;
  update_inflight_bound(now);
}

double ArbiterPolicy::target(InstanceId id) const {
  auto it = members_.find(id);
  return it == members_.end() ? 0.0 : it->second.target;
}

Nanos ArbiterPolicy::floor_charged(InstanceId id) const {
  auto it = members_.find(id);
  return it == members_.end() ? 0 : it->second.floor.floor_charged();
}

bool ArbiterPolicy::asking(InstanceId id) const {
  auto it = members_.find(id);
  return it != members_.end() && it->second.asking;
}

void ArbiterPolicy::update_inflight_bound(Nanos now) {
  std::size_t with_processes = 0;
  bool all_burst = true;
  for (const auto& [id, m] : members_) {
    if (m.processes == 0) continue;
    ++with_processes;
    all_burst = all_burst && m.mode != Mode::kCap;
  }
  const Nanos bound = faa::inflight_bound(settings_, with_processes, all_burst);
  if (bound < inflight_bound_ns_) {
    // What was queued under the deeper bound drains within that bound's
    // time; until then it is not a long kernel to wait for (see tick()).
    loose_bound_ns_ = inflight_bound_ns_;
    loose_until_ns_ = now + inflight_bound_ns_;
  }
  inflight_bound_ns_ = bound;
}

void ArbiterPolicy::charge_and_observe(Nanos now, Nanos held_ns,
                                       const std::map<InstanceId, Activity>& observed) {
  static const Activity kNothing{};
  std::vector<Nanos> charges;
  charges.reserve(members_.size());
  for (auto& [id, m] : members_) {
    auto o = observed.find(id);
    Nanos charge = o == observed.end() ? 0 : std::max<Nanos>(o->second.device_ns, 0);
    if (published_ != id) {
      // Only the holder is let launch: another's report is the tail of its
      // last slice, believed up to what that tail can have been, or a lie.
      const Nanos believable = now <= m.tail_until_ns ? m.tail_budget_ns : 0;
      charge = std::min(charge, believable);
      m.tail_budget_ns = believable - charge;
    }
    charges.push_back(charge);
  }
  charges = trim_overcharge(charges, &charge_credit_ns_);
  std::size_t i = 0;
  for (auto& [id, m] : members_) {
    auto o = observed.find(id);
    const Activity& a = o == observed.end() ? kNothing : o->second;
    m.processes = a.processes;
    // The time it held the slice while others waited is charged if its
    // reports fall short of it, where the policy can justify it: a blocked
    // thread (busy) means work queued on the GPU, a drain is its own tail,
    // and a launch says it used its slice. Every one of these is its own
    // page's word, so none may be believed in part: a holder that launches
    // while it holds the GPU from others pays for the time it held, however
    // little it reports (forgiving reports above a quarter let one that
    // reported half take 1.7 times its share). The GPU's idle gaps while a
    // busy host denies a holder the CPU are its own, as on any time-sliced
    // device.
    const bool claims = a.busy > 0 || drain_until_ns_ != 0 || a.launched;
    const bool held = published_ == id && contended_ && claims;
    // Until it launches, a holder may just not have run yet (see HeldTimeFloor).
    if (published_ != id) m.ran_this_grant = false;
    const bool waking = held && !m.ran_this_grant && !a.launched;
    if (published_ == id && a.launched) m.ran_this_grant = true;
    const Nanos charge = m.floor.settle(charges[i++], held ? held_ns : 0, waking ? held_ns : 0);
    if (charge > 0) (void)scheduler_.charge(id, charge, now);
    const Nanos inflight = std::max<Nanos>(a.inflight_ns, 0);
    if (inflight != m.inflight_ns) (void)scheduler_.set_pending(id, inflight, now);
    m.inflight_ns = inflight;
    m.reported_inflight_ns = std::max<Nanos>(a.reported_inflight_ns, 0);
    m.blocked = a.busy > 0;
    if (a.launched || a.busy > 0) {
      m.last_activity = now;
      m.idle_hint_armed = true;
    } else if (m.idle_hint_armed && a.idle_since_ns > m.last_activity && a.idle_since_ns <= now) {
      // The shim said when its last sync returned: the grace counts from
      // then. Once: a hint renewed at every look would keep a holder that
      // does nothing asking for ever.
      m.last_activity = a.idle_since_ns;
      m.idle_hint_armed = false;
    }
    // A waiting instance asks exactly while a thread is blocked (gate, bound
    // or sync). The holder keeps asking for a short grace after its last
    // launch: a process between a sync and its next launch is not idle.
    const bool holding = published_ == id;
    const bool asking =
        a.processes > 0 &&
        (a.busy > 0 || (holding && now - m.last_activity < settings_.idle_grace_ns));
    m.wants = asking;
  }
  apply_gang_windows(now);
  update_inflight_bound(now);  // processes may have come or gone on their own
}

Decision ArbiterPolicy::tick(Nanos now, const std::map<InstanceId, Activity>& observed) {
  const Nanos since = now > last_tick_ns_ ? now - last_tick_ns_ : 0;
  // Held time counts up to the look the policy asked for, and a bounded
  // lateness beyond it: a longer gap is the agent's own stall.
  const Nanos planned = planned_tick_ns_ > last_tick_ns_ && planned_tick_ns_ != kNever
                            ? planned_tick_ns_ - last_tick_ns_
                            : 0;
  const Nanos held_ns = std::min(since, planned + kMaxHeldPerTickNs);
  // Credit is bounded: idle time is not banked for later overcharges.
  charge_credit_ns_ = std::min(charge_credit_ns_ + since, kMaxChargeCreditNs);
  last_tick_ns_ = std::max(last_tick_ns_, now);
  charge_and_observe(now, held_ns, observed);
  Decision d = decide(now);
  d.next_tick_ns = std::min(d.next_tick_ns, next_gang_boundary(now));
  planned_tick_ns_ = d.next_tick_ns;
  return d;
}

Decision ArbiterPolicy::decide(Nanos now) {
  if (successor_) {
    // No decision while the old holder's tail drains: its successor is
    // chosen, and its slice starts when the tail is done.
    if (auto d = handover_drain(now, kNever)) return *d;
    const InstanceId old = published_.value_or(*successor_);
    successor_.reset();
    drain_until_ns_ = 0;
    return granted(now, scheduler_.handover_done(old, now));
  }
  if (auto d = long_tail_drain(now)) return *d;
  const uint64_t preemptions_before = scheduler_.preemptions();
  const Grant grant = scheduler_.decide(now);
  // A preemption is for latency: the newcomer starts at once and shares the
  // device with the old holder's tail (that overlap is trimmed from charges).
  const bool preempted = scheduler_.preemptions() != preemptions_before;
  if (auto d = start_handover(now, grant, preempted)) return *d;
  return granted(now, grant);
}

std::optional<Decision> ArbiterPolicy::long_tail_drain(Nanos now) {
  // A holder running a long kernel (more queued than twice the in-flight
  // bound) keeps the GPU until it is done: the gate cannot stop that work, so
  // the next decision waits until its charge has come in (its sync returns),
  // instead of starting another instance's slice on a busy device.
  // Its slice still ends on time: it may launch nothing more meanwhile.
  const Nanos long_tail = 2 * (now < loose_until_ns_ ? std::max(loose_bound_ns_, inflight_bound_ns_)
                                                     : inflight_bound_ns_);
  if (!published_) return std::nullopt;
  const auto h = members_.find(*published_);
  if (h == members_.end() || !h->second.asking || h->second.inflight_ns <= long_tail ||
      now < slice_end_ns_) {
    return std::nullopt;
  }
  if (drain_until_ns_ == 0) {
    drain_started_ns_ = now;
    drain_until_ns_ = now + std::min(h->second.inflight_ns, settings_.max_drain_ns);
  }
  if (now >= drain_until_ns_) {
    drain_until_ns_ = 0;
    return std::nullopt;
  }
  Decision d;
  d.draining = true;
  d.slice_end_ns = slice_end_ns_;
  // Its sync returning idle kicks the agent; the backstop is when the device
  // can have run what exceeds the long-tail mark.
  d.next_tick_ns = std::min(
      drain_until_ns_, now + std::max(settings_.drain_poll_ns, h->second.inflight_ns - long_tail));
  d.waiters = waiters_;
  return d;
}

std::optional<Decision> ArbiterPolicy::start_handover(Nanos now, const Grant& grant,
                                                      bool preempted) {
  // Drain before handover: work already queued cannot be stopped by the gate.
  // If the old holder still has more queued than the handover tail, the new
  // holder starts when it is done, so the two never share the device, and
  // each is charged exactly its own time. The GPU stays busy meanwhile with
  // the old holder's work, which FAA charges as overrun.
  if (preempted || !grant.holder || !published_ || *grant.holder == *published_) {
    return std::nullopt;
  }
  // A gang member's window opens now on every GPU of its gang: waiting for
  // this GPU's tail (which a co-tenant may claim is long) would start it
  // late here only. What overlaps is trimmed from both charges.
  const auto old = members_.find(*published_);
  if (old == members_.end() || old->second.inflight_ns <= settings_.handover_tail_ns) {
    return std::nullopt;
  }
  if (in_gang_window(*grant.holder, now)) return std::nullopt;
  successor_ = grant.holder;
  // The tail drains while the successor waits: held against it, whatever
  // the last grant found (a gang member's window hid the others).
  contended_ = true;
  drain_started_ns_ = now;
  drain_until_ns_ =
      now + std::min(old->second.inflight_ns, settings_.max_drain_ns) + settings_.drain_slack_ns;
  return handover_drain(now, grant.until);
}

std::optional<Decision> ArbiterPolicy::handover_drain(Nanos now, Nanos slice_until) {
  const auto old = published_ ? members_.find(*published_) : members_.end();
  if (old == members_.end()) return std::nullopt;
  // Waiting shims publish their remaining tail every drain poll; the next
  // holder starts when the old one's is within handover_tail_ns (its own
  // wake-up and first launch cover the rest), or at the deadline.
  // The tail is an estimate (launches x their average duration) and one
  // long kernel among short ones outlasts it. A process blocked in the
  // gate or a sync keeps reporting its tail as it drains (the gate polls,
  // the sync returns when the work is done): that report is followed up to
  // MaxDrain. The rest of the tail, from processes that said it at their
  // last call, is waited for until the estimate's deadline only.
  const Nanos tail = old->second.inflight_ns;
  const bool estimate_due = now < drain_until_ns_ && tail > settings_.handover_tail_ns;
  const bool report_due = now < drain_started_ns_ + settings_.max_drain_ns &&
                          old->second.reported_inflight_ns > settings_.handover_tail_ns;
  if (!(estimate_due || report_due)) return std::nullopt;
  Decision d;
  d.draining = true;
  d.slice_end_ns = slice_end_ns_;
  // The draining process kicks the agent when its tail falls to the handover
  // tail (a sync that returns idle does too): this look is only the backstop
  // for one that does not, due a slack after the device can have run the tail.
  const Nanos until_short = std::max(tail, old->second.reported_inflight_ns) -
                            settings_.handover_tail_ns + settings_.drain_slack_ns;
  const Nanos deadline = std::max(estimate_due ? drain_until_ns_ : 0,
                                  report_due ? drain_started_ns_ + settings_.max_drain_ns : 0);
  d.next_tick_ns =
      std::min({slice_until, deadline, now + std::max(settings_.drain_poll_ns, until_short)});
  d.waiters = waiters_;
  return d;
}

Decision ArbiterPolicy::granted(Nanos now, const Grant& grant) {
  drain_until_ns_ = 0;
  const bool same_holder = published_ == grant.holder;
  if (!same_holder && published_) {
    // What the old holder may still report: its queued tail (as it said it,
    // at most MaxDrain: a drain waits no longer) and what it ran but had not
    // reported yet (up to the in-flight bound), for as long as that could
    // take to come in.
    if (auto old = members_.find(*published_); old != members_.end()) {
      Member& m = old->second;
      m.tail_budget_ns =
          std::min(std::max(m.inflight_ns, m.reported_inflight_ns), settings_.max_drain_ns) +
          inflight_bound_ns_;
      m.tail_until_ns = now + m.tail_budget_ns + kMaxChargeCreditNs;
    }
  }
  published_ = grant.holder;
  slice_end_ns_ = grant.until;
  Decision d;
  d.holder = grant.holder;
  d.slice_end_ns = grant.until;
  for (const auto& [id, m] : members_) {
    if (m.asking && grant.holder != id) ++d.waiters;
  }
  const bool others_asking = d.waiters > 0;
  // Contention for the held-time floor counts who wants the GPU before gang
  // windows hide them: a rank in its window holds it against co-tenants, so
  // one that claims work it does not report is charged there too.
  bool others_want = others_asking;
  for (const auto& [id, m] : members_)
    others_want = others_want || (m.wants && grant.holder != id);
  contended_ = others_want;
  waiters_ = d.waiters;
  Nanos next = grant.until;
  // A contended holder is checked often so an idle one yields early; any
  // asking instance keeps the scan going so charges and asks are seen.
  const Member* h = grant.holder ? &members_.at(*grant.holder) : nullptr;
  if (others_asking || (h != nullptr && h->asking)) {
    // A holder blocked at the bound or in a sync cannot be idle before its
    // queued work has run (and a sync that returns idle kicks the agent).
    Nanos look_in = h != nullptr && h->blocked ? std::max(settings_.poll_ns, h->inflight_ns)
                                               : settings_.poll_ns;
    // A holder found active look after look is most likely busy to the end
    // of its slice: the poll doubles (up to 4x) while it stays so. Looks are
    // the agent's cost (a wake-up each); an idle holder is still found
    // within four polls, or by the kick of a sync that returns idle, and
    // a waiter's kick looks at once whatever the poll.
    Member* hm = grant.holder ? &members_.at(*grant.holder) : nullptr;
    if (hm != nullptr) {
      const bool active = hm->last_activity == now;
      hm->active_looks = same_holder && active ? std::min<uint32_t>(hm->active_looks + 1, 2) : 0;
      look_in <<= hm->active_looks;
    }
    next = std::min(next, now + look_in);
    // A holder with nobody blocked may be going idle: look again exactly when
    // its grace runs out, so the slice moves on without a poll's delay.
    if (h != nullptr && others_asking && h->asking && !h->blocked &&
        h->last_activity + settings_.idle_grace_ns > now) {
      next = std::min(next, h->last_activity + settings_.idle_grace_ns + 1);
    }
  }
  d.next_tick_ns = next;
  return d;
}

}  // namespace egpu::faa
