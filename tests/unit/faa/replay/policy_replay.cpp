#include "replay/policy_replay.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace egpu::faa::replay {

namespace {

constexpr Nanos kLiarClaim = 50 * kMillisecond;  // the tail a liar says it has queued

ArbiterPolicy make_policy(const PolicySettings& settings) {
  auto p = ArbiterPolicy::create(settings, 0);
  if (!p.ok()) throw std::invalid_argument(p.error());
  return std::move(p.value());
}

}  // namespace

PolicyReplay::PolicyReplay(ReplayOptions options, std::vector<ProcessScript> scripts)
    : options_(options) {
  uint32_t gpus = 1;
  for (auto& s : scripts) {
    gpus = std::max(gpus, s.gpu + 1);
    if (s.comm >= 0) ++comm_size_[s.comm];
    Proc p;
    p.script = std::move(s);
    procs_.push_back(std::move(p));
  }
  for (uint32_t g = 0; g < gpus; ++g) {
    gpus_.emplace_back(make_policy(options.settings));
    if (options.one_node) gpus_.back().policy.share_gang_grants(grants_, g);
  }
  for (std::size_t i = 0; i < procs_.size(); ++i) {
    Gpu& g = gpus_[procs_[i].script.gpu];
    procs_[i].id = static_cast<InstanceId>(g.procs.size());
    g.procs.push_back(i);
  }
}

uint64_t PolicyReplay::ticks() const {
  uint64_t total = 0;
  for (const Gpu& g : gpus_)
    total += g.ticks;
  return total;
}

bool PolicyReplay::may_launch(std::size_t i) const {
  const Proc& p = procs_[i];
  const Step& s = p.script.steps[p.step];
  return p.queued == 0 || p.queued + s.length <= gpu_of(p).policy.inflight_bound();
}

void PolicyReplay::gate_kick(const Proc& p) {
  // The shim's gate does not kick while the GPU drains this process's own
  // tail for a waiting successor: its tail falling short will (note_tail).
  const Gpu& g = gpu_of(p);
  if (draining(g) && p.queued > options_.settings.handover_tail_ns) return;
  kick(gpus_[p.script.gpu], now_);
}

void PolicyReplay::kick(Gpu& g, Nanos when) {
  const Nanos at = std::max(when + options_.kick_latency, g.last_kick + options_.min_kick_interval);
  if (at < g.next_tick) {
    g.next_tick = at;
    g.last_kick = at;
  }
}

void PolicyReplay::launch(std::size_t i, Nanos length, int64_t call) {
  Proc& p = procs_[i];
  Gpu& g = gpu_of(p);
  g.device.push_back({i, length, call});
  if (g.device.size() == 1) start_head(g, now_);
  p.queued += length;
  p.launched = true;
  p.wake_at = now_ + options_.launch_cost;
}

void PolicyReplay::next_step(Proc& p) {
  p.done_in_step = 0;
  ++p.step;
  if (p.step >= p.script.steps.size() && p.script.repeat) p.step = 0;
}

// Runs process i at now_ as far as it goes without time passing; true if its
// state changed.
bool PolicyReplay::run_one(std::size_t i) {
  Proc& p = procs_[i];
  Gpu& g = gpu_of(p);
  const InstanceId id = p.id;
  switch (p.state) {
    case State::kExited:
      return false;
    case State::kNotStarted:
      if (p.script.start > now_) return false;
      if (Status s = g.policy.join(id, p.script.target, p.script.mode, now_); !s.ok()) {
        throw std::invalid_argument("join: " + s.error());
      }
      if (Status s = g.policy.set_gang_window(id, p.script.gang); !s.ok()) {
        throw std::invalid_argument(s.error());
      }
      g.policy.set_processes(id, 1, now_);
      p.state = p.script.squatter ? State::kSleeping : State::kReady;
      p.wake_at = p.script.squatter ? kNever : now_;  // tick() says what it shows
      return true;
    case State::kGate:
      if (g.holder != id) return false;
      p.gate_waits.emplace_back(p.gate_since, now_ - p.gate_since);
      p.gate_owed.push_back(p.owed);
      p.gate_since = -1;
      p.state = p.script.wake_delay > 0 ? State::kWaking : State::kReady;
      p.wake_at = now_ + p.script.wake_delay;
      return true;
    case State::kWaking:
      if (p.wake_at > now_) return false;
      p.state = State::kReady;
      return true;
    case State::kBound:
      if (g.holder != id) {  // the slice moved on while it waited at the bound
        // No kick: the agent just decided against it and sees it blocked at
        // its next look (the shim's admit_launch, `held`).
        p.state = State::kGate;
        p.gate_since = now_;
        return true;
      }
      if (!may_launch(i)) return false;
      p.state = State::kReady;
      return true;
    case State::kSync:
      if (p.queued != 0) return false;
      p.idle_since = now_;
      p.state = State::kReady;
      return true;
    case State::kSleeping:
      if (p.wake_at > now_) return false;
      if (p.stalled) {  // the host runs it again: what completed meanwhile is reported
        p.reported += p.unreported;
        p.unreported = 0;
        p.stalled = false;
      }
      p.state = State::kReady;
      return true;
    case State::kReady:
      break;
  }
  if (p.wake_at > now_) return false;
  if (p.step >= p.script.steps.size()) {
    p.state = State::kSleeping;  // script done: stays attached, idle
    p.wake_at = kNever;
    return true;
  }
  const Step& s = p.script.steps[p.step];
  switch (s.kind) {
    case Step::Kind::kIdle:  // a step takes time, so a script of them cannot spin
      p.state = State::kSleeping;
      p.wake_at = now_ + std::max<Nanos>(s.length, 1);
      next_step(p);
      return true;
    case Step::Kind::kStall:
      p.state = State::kSleeping;
      p.stalled = true;
      p.wake_at = now_ + std::max<Nanos>(s.length, 1);
      next_step(p);
      return true;
    case Step::Kind::kExit:
      p.state = State::kExited;
      {
        const bool ran_head = !g.device.empty() && g.device.front().owner == i;
        if (ran_head && now_ > g.kernel_started) {  // aborted where it runs
          p.ran.emplace_back(g.kernel_started, now_);
        }
        // All its work goes first: none of its collectives' parts may start
        // (and count as arrived) on the way.
        std::erase_if(g.device, [i](const Kernel& k) { return k.owner == i; });
        if (ran_head && !g.device.empty()) start_head(g, now_);
      }
      p.queued = 0;
      p.unreported = 0;
      g.policy.set_processes(id, 0, now_);
      return true;
    case Step::Kind::kKernels:
    case Step::Kind::kCollective:
      break;
  }
  if (s.count != 0 && p.done_in_step >= s.count) {
    next_step(p);
    return true;
  }
  if (g.holder != id) {
    p.state = State::kGate;
    p.gate_since = now_;
    gate_kick(p);
    return true;
  }
  if (!may_launch(i)) {
    p.state = State::kBound;
    return true;
  }
  const bool collective = s.kind == Step::Kind::kCollective && p.script.comm >= 0;
  launch(i, s.length, collective ? p.calls++ : -1);
  ++p.done_in_step;
  if (s.sync_every != 0 && (p.done_in_step % s.sync_every == 0 || p.done_in_step == s.count)) {
    p.state = State::kSync;
    kick(g, now_);
  }
  return true;
}

void PolicyReplay::run_processes() {
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < procs_.size(); ++i)
      changed = run_one(i) || changed;
  }
}

void PolicyReplay::start_head(Gpu& g, Nanos at) {
  g.kernel_started = at;
  const Kernel& k = g.device.front();
  if (k.call < 0) return;
  Call& c = calls_[{procs_[k.owner].script.comm, k.call}];
  ++c.arrived;
  c.last_arrival = std::max(c.last_arrival, at);
}

Nanos PolicyReplay::head_end(const Gpu& g) const {
  if (g.device.empty()) return kNever;
  const Kernel& k = g.device.front();
  if (k.call < 0) return g.kernel_started + k.length;
  const int comm = procs_[k.owner].script.comm;
  const Call& c = calls_.at({comm, k.call});
  if (c.arrived < comm_size_.at(comm)) return kNever;  // spins until its peers start
  return std::max(c.last_arrival, g.kernel_started) + k.length;
}

bool PolicyReplay::advance_gpu(Gpu& g, Nanos to) {
  bool any = false;
  for (Nanos end = head_end(g); end <= to; end = head_end(g)) {
    any = true;
    const Kernel k = g.device.front();
    Proc& p = procs_[k.owner];
    p.ran.emplace_back(g.kernel_started, end);
    if (k.call >= 0) p.call_ends.push_back(end);
    const Nanos before = p.queued;
    p.queued -= k.length;
    // The shim's note_tail: a process waiting in the gate while the GPU
    // drains (no holder) kicks the agent when its tail falls to the handover
    // tail; its sync returning idle (note_idle) does too.
    const Nanos tail = options_.settings.handover_tail_ns;
    if (draining(g) && ((p.state == State::kGate && before > tail && p.queued <= tail) ||
                        (p.state == State::kSync && p.queued == 0))) {
      kick(g, end);  // when the kernel ends
    }
    // What the shim's events measure: a collective's spin included.
    (p.stalled ? p.unreported : p.reported) += end - g.kernel_started;
    g.device.pop_front();
    if (!g.device.empty()) start_head(g, end);
  }
  if (g.device.empty()) g.kernel_started = to;
  return any;
}

void PolicyReplay::advance_device(Nanos to) {
  // A part starting on one GPU may complete a collective another GPU's head
  // spins on: go round until no GPU has anything more to run by `to`.
  for (bool changed = true; changed;) {
    changed = false;
    for (Gpu& g : gpus_)
      changed = advance_gpu(g, to) || changed;
  }
}

Nanos PolicyReplay::next_event() const {
  Nanos t = kNever;
  for (const Gpu& g : gpus_)
    t = std::min({t, g.next_tick, head_end(g)});
  for (const Proc& p : procs_) {
    if (p.state == State::kNotStarted) t = std::min(t, std::max(p.script.start, now_ + 1));
    if ((p.state == State::kReady || p.state == State::kSleeping || p.state == State::kWaking) &&
        p.wake_at > now_) {
      t = std::min(t, p.wake_at);
    }
  }
  return t;
}

void PolicyReplay::tick(uint32_t gpu) {
  Gpu& g = gpus_[gpu];
  ++g.ticks;
  std::map<InstanceId, Activity> observed;
  for (std::size_t i = 0; i < procs_.size(); ++i) {
    Proc& p = procs_[i];
    if (p.state == State::kNotStarted || p.script.gpu != gpu) continue;
    Activity a;
    const bool alive = p.state != State::kExited;
    a.processes = alive ? 1 : 0;
    a.launched = p.launched;
    const bool blocked = p.state == State::kGate || p.state == State::kWaking ||
                         p.state == State::kBound || p.state == State::kSync;
    a.busy = alive && (blocked || p.script.liar) ? 1 : 0;
    a.inflight_ns = p.queued + (p.script.liar && alive ? kLiarClaim : 0);
    a.reported_inflight_ns = a.busy != 0 ? a.inflight_ns : 0;
    a.device_ns = p.script.liar ? 0 : p.reported;
    a.idle_since_ns = p.idle_since;
    if (p.script.reports < 1.0 && alive) {
      if (g.holder == p.id) {
        a.busy = p.script.says_waking ? 1 : 0;
        a.reported_inflight_ns = p.script.says_waking ? a.inflight_ns : 0;
        a.launched = !p.script.says_waking;
      }
      a.device_ns = static_cast<Nanos>(static_cast<double>(p.reported) * p.script.reports);
    }
    if (p.script.squatter && alive) {
      const bool holds = g.holder == p.id;
      a.busy = holds ? 0 : 1;  // at the gate until it holds
      a.launched = false;
      a.inflight_ns = 0;
      a.reported_inflight_ns = 0;
      a.device_ns = 0;
      a.idle_since_ns = holds ? now_ : 0;
    }
    p.reported = 0;
    p.launched = false;
    observed.emplace(p.id, a);
  }
  const Decision d = g.policy.tick(now_, observed);
  g.holder = d.draining ? std::nullopt : d.holder;
  if (d.draining && g.drain_since < 0) g.drain_since = now_;
  if (!d.draining && g.drain_since >= 0) {
    g.drains.emplace_back(g.drain_since, now_);
    g.drain_since = -1;
  }
  TraceEntry e{now_, d.holder ? static_cast<int>(g.procs.at(*d.holder)) : -1, d.draining,
               d.slice_end_ns};
  if (d.draining) e.holder = -1;
  if (g.trace.empty() || g.trace.back().holder != e.holder ||
      g.trace.back().draining != e.draining) {
    g.trace.push_back(e);
  }
  if (g.holder && (!g.last_granted || *g.holder != *g.last_granted)) {
    Proc& next = procs_[g.procs.at(*g.holder)];
    next.granted_at = now_;
    if (g.last_granted) {
      const std::size_t old_index = g.procs.at(*g.last_granted);
      Proc& old = procs_[old_index];
      // Its queued work runs on and is charged to this grant too.
      const Nanos beyond =
          used(old_index, old.granted_at, now_) + old.queued - options_.settings.faa.slice;
      old.owed =
          beyond > 0 ? static_cast<Nanos>(static_cast<double>(beyond) / old.script.target) : 0;
    }
  }
  if (g.holder && g.last_granted && *g.holder != *g.last_granted) {
    g.handovers.push_back({now_, g.procs.at(*g.last_granted), g.procs.at(*g.holder),
                           procs_[g.procs.at(*g.last_granted)].queued});
  }
  if (g.holder) g.last_granted = g.holder;
  g.next_tick = std::max(d.next_tick_ns, now_ + 1);
}

void PolicyReplay::run_until(Nanos end) {
  while (true) {
    for (uint32_t g = 0; g < gpus_.size(); ++g)
      if (now_ >= gpus_[g].next_tick) tick(g);
    run_processes();
    const Nanos t = next_event();
    if (t > end) {
      advance_device(end);
      now_ = end;
      return;
    }
    advance_device(t);
    now_ = t;
  }
}

Nanos PolicyReplay::used(std::size_t i, Nanos from, Nanos to) const {
  Nanos total = 0;
  for (const auto& [a, b] : procs_[i].ran)
    total += std::max<Nanos>(0, std::min(b, to) - std::max(a, from));
  const Gpu& g = gpu_of(procs_[i]);
  if (!g.device.empty() && g.device.front().owner == i) {  // the running kernel, so far
    total += std::max<Nanos>(0, std::min(now_, to) - std::max(g.kernel_started, from));
  }
  return total;
}

double PolicyReplay::share(std::size_t i, Nanos from, Nanos to) const {
  return static_cast<double>(used(i, from, to)) / static_cast<double>(to - from);
}

Nanos PolicyReplay::longest_gate_wait(std::size_t i, Nanos from) const {
  const Proc& p = procs_[i];
  Nanos longest = 0;
  for (const auto& [start, length] : p.gate_waits)
    if (start >= from) longest = std::max(longest, length);
  if (p.state == State::kGate && p.gate_since >= from) {
    longest = std::max(longest, now_ - p.gate_since);
  }
  return longest;
}

Nanos PolicyReplay::drained_within(const Gpu& g, Nanos from, Nanos to) const {
  Nanos total = 0;
  for (const auto& [a, b] : g.drains)
    total += std::max<Nanos>(0, std::min(b, to) - std::max(a, from));
  if (g.drain_since >= 0) total += std::max<Nanos>(0, to - std::max(g.drain_since, from));
  return total;
}

std::size_t PolicyReplay::collectives_done(std::size_t i, Nanos from, Nanos to) const {
  const auto& ends = procs_[i].call_ends;
  return static_cast<std::size_t>(
      std::count_if(ends.begin(), ends.end(), [&](Nanos e) { return e >= from && e < to; }));
}

Nanos PolicyReplay::longest_gate_wait_beyond_owed(std::size_t i) const {
  const Proc& p = procs_[i];
  Nanos longest = 0;
  for (std::size_t w = 0; w < p.gate_waits.size(); ++w) {
    const auto [start, length] = p.gate_waits[w];
    longest = std::max(longest,
                       length - p.gate_owed[w] - drained_within(gpu_of(p), start, start + length));
  }
  if (p.state == State::kGate && p.gate_since >= 0) {
    longest = std::max(
        longest, now_ - p.gate_since - p.owed - drained_within(gpu_of(p), p.gate_since, now_));
  }
  return longest;
}

std::string PolicyReplay::describe(std::size_t i) const {
  const ProcessScript& s = procs_[i].script;
  std::string out = "target " + std::to_string(s.target) +
                    (s.mode == Mode::kCap ? " cap" : " burst") + (s.liar ? " liar" : "") +
                    (s.squatter ? " squatter" : "") + ":";
  for (const Step& step : s.steps) {
    switch (step.kind) {
      case Step::Kind::kKernels:
        out += " kernels(" + std::to_string(step.length / 1000) + "us x" +
               std::to_string(step.count) + " sync/" + std::to_string(step.sync_every) + ")";
        break;
      case Step::Kind::kIdle:
        out += " idle(" + std::to_string(step.length / 1000) + "us)";
        break;
      case Step::Kind::kStall:
        out += " stall(" + std::to_string(step.length / 1000) + "us)";
        break;
      case Step::Kind::kExit:
        out += " exit";
        break;
      case Step::Kind::kCollective:
        out += " collective(" + std::to_string(step.length / 1000) + "us)";
        break;
    }
  }
  return out + (s.repeat ? " repeat" : "");
}

std::string PolicyReplay::trace_text(uint32_t gpu) const {
  std::string out;
  char line[96];
  for (const TraceEntry& e : gpus_[gpu].trace) {
    const char* what = e.draining ? "drain" : "grant";
    if (e.draining) {
      std::snprintf(line, sizeof line, "%10.3f ms  drain\n", e.at / 1e6);
    } else if (e.holder < 0) {
      std::snprintf(line, sizeof line, "%10.3f ms  none\n", e.at / 1e6);
    } else {
      std::snprintf(line, sizeof line, "%10.3f ms  %s %d until %.3f ms\n", e.at / 1e6, what,
                    e.holder, e.slice_end / 1e6);
    }
    out += line;
  }
  return out;
}

}  // namespace egpu::faa::replay
