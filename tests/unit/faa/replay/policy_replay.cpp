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
    : options_(options), policy_(make_policy(options.settings)) {
  for (auto& s : scripts) {
    Proc p;
    p.script = std::move(s);
    procs_.push_back(std::move(p));
  }
  next_tick_ = kNever;
}

bool PolicyReplay::may_launch(std::size_t i) const {
  const Proc& p = procs_[i];
  const Step& s = p.script.steps[p.step];
  return p.queued == 0 || p.queued + s.length <= policy_.inflight_bound();
}

void PolicyReplay::gate_kick(const Proc& p) {
  // The shim's gate does not kick while the GPU drains this process's own
  // tail for a waiting successor: its tail falling short will (note_tail).
  const bool draining = !holder_ && drain_since_ >= 0;
  if (draining && p.queued > options_.settings.handover_tail_ns) return;
  kick(now_);
}

void PolicyReplay::kick(Nanos when) {
  const Nanos at = std::max(when + options_.kick_latency, last_kick_ + options_.min_kick_interval);
  if (at < next_tick_) {
    next_tick_ = at;
    last_kick_ = at;
  }
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
  const auto id = static_cast<InstanceId>(i);
  switch (p.state) {
    case State::kExited:
      return false;
    case State::kNotStarted:
      if (p.script.start > now_) return false;
      if (Status s = policy_.join(id, p.script.target, p.script.mode, now_); !s.ok()) {
        throw std::invalid_argument("join: " + s.error());
      }
      policy_.set_processes(id, 1, now_);
      p.state = State::kReady;
      p.wake_at = now_;
      return true;
    case State::kGate:
      if (holder_ != id) return false;
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
      if (holder_ != id) {  // the slice moved on while it waited at the bound
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
      for (auto it = device_.begin(); it != device_.end();) {
        if (it->owner != i) {
          ++it;
          continue;
        }
        if (it == device_.begin()) {  // aborted where it runs
          if (now_ > kernel_started_) p.ran.emplace_back(kernel_started_, now_);
          kernel_started_ = now_;
        }
        it = device_.erase(it);
      }
      p.queued = 0;
      p.unreported = 0;
      policy_.set_processes(id, 0, now_);
      return true;
    case Step::Kind::kKernels:
      break;
  }
  if (s.count != 0 && p.done_in_step >= s.count) {
    next_step(p);
    return true;
  }
  if (holder_ != id) {
    p.state = State::kGate;
    p.gate_since = now_;
    gate_kick(p);
    return true;
  }
  if (!may_launch(i)) {
    p.state = State::kBound;
    return true;
  }
  if (device_.empty()) kernel_started_ = now_;
  device_.push_back({i, s.length});
  p.queued += s.length;
  p.launched = true;
  ++p.done_in_step;
  p.wake_at = now_ + options_.launch_cost;
  if (s.sync_every != 0 && (p.done_in_step % s.sync_every == 0 || p.done_in_step == s.count)) {
    p.state = State::kSync;
    kick(now_);
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

void PolicyReplay::advance_device(Nanos to) {
  while (!device_.empty() && kernel_started_ + device_.front().length <= to) {
    const Kernel k = device_.front();
    const Nanos end = kernel_started_ + k.length;
    Proc& p = procs_[k.owner];
    p.ran.emplace_back(kernel_started_, end);
    const Nanos before = p.queued;
    p.queued -= k.length;
    // The shim's note_tail: a process waiting in the gate while the GPU
    // drains (no holder) kicks the agent when its tail falls to the handover
    // tail; its sync returning idle (note_idle) does too.
    const Nanos tail = options_.settings.handover_tail_ns;
    const bool draining = !holder_ && drain_since_ >= 0;
    if (draining && ((p.state == State::kGate && before > tail && p.queued <= tail) ||
                     (p.state == State::kSync && p.queued == 0))) {
      kick(end);  // when the kernel ends
    }
    (p.stalled ? p.unreported : p.reported) += k.length;
    device_.pop_front();
    kernel_started_ = end;
  }
  if (device_.empty()) kernel_started_ = to;
}

Nanos PolicyReplay::next_event() const {
  Nanos t = next_tick_;
  if (!device_.empty()) t = std::min(t, kernel_started_ + device_.front().length);
  for (const Proc& p : procs_) {
    if (p.state == State::kNotStarted) t = std::min(t, std::max(p.script.start, now_ + 1));
    if ((p.state == State::kReady || p.state == State::kSleeping || p.state == State::kWaking) &&
        p.wake_at > now_) {
      t = std::min(t, p.wake_at);
    }
  }
  return t;
}

void PolicyReplay::tick() {
  ++ticks_;
  std::map<InstanceId, Activity> observed;
  for (std::size_t i = 0; i < procs_.size(); ++i) {
    Proc& p = procs_[i];
    if (p.state == State::kNotStarted) continue;
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
    p.reported = 0;
    p.launched = false;
    observed.emplace(static_cast<InstanceId>(i), a);
  }
  const Decision d = policy_.tick(now_, observed);
  holder_ = d.draining ? std::nullopt : d.holder;
  if (d.draining && drain_since_ < 0) drain_since_ = now_;
  if (!d.draining && drain_since_ >= 0) {
    drains_.emplace_back(drain_since_, now_);
    drain_since_ = -1;
  }
  TraceEntry e{now_, d.holder ? static_cast<int>(*d.holder) : -1, d.draining, d.slice_end_ns};
  if (d.draining) e.holder = -1;
  if (trace_.empty() || trace_.back().holder != e.holder || trace_.back().draining != e.draining) {
    trace_.push_back(e);
  }
  if (holder_ && (!last_granted_ || *holder_ != *last_granted_)) {
    Proc& next = procs_[static_cast<std::size_t>(*holder_)];
    next.granted_at = now_;
    if (last_granted_) {
      Proc& old = procs_[static_cast<std::size_t>(*last_granted_)];
      // Its queued work runs on and is charged to this grant too.
      const Nanos beyond = used(static_cast<std::size_t>(*last_granted_), old.granted_at, now_) +
                           old.queued - options_.settings.faa.slice;
      old.owed =
          beyond > 0 ? static_cast<Nanos>(static_cast<double>(beyond) / old.script.target) : 0;
    }
  }
  if (holder_ && last_granted_ && *holder_ != *last_granted_) {
    handovers_.push_back({now_, static_cast<std::size_t>(*last_granted_),
                          static_cast<std::size_t>(*holder_),
                          procs_[static_cast<std::size_t>(*last_granted_)].queued});
  }
  if (holder_) last_granted_ = holder_;
  next_tick_ = std::max(d.next_tick_ns, now_ + 1);
}

void PolicyReplay::run_until(Nanos end) {
  while (true) {
    if (now_ >= next_tick_) tick();
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
  if (!device_.empty() && device_.front().owner == i) {  // the running kernel, so far
    total += std::max<Nanos>(0, std::min(now_, to) - std::max(kernel_started_, from));
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

Nanos PolicyReplay::drained_within(Nanos from, Nanos to) const {
  Nanos total = 0;
  for (const auto& [a, b] : drains_)
    total += std::max<Nanos>(0, std::min(b, to) - std::max(a, from));
  if (drain_since_ >= 0) total += std::max<Nanos>(0, to - std::max(drain_since_, from));
  return total;
}

Nanos PolicyReplay::longest_gate_wait_beyond_owed(std::size_t i) const {
  const Proc& p = procs_[i];
  Nanos longest = 0;
  for (std::size_t w = 0; w < p.gate_waits.size(); ++w) {
    const auto [start, length] = p.gate_waits[w];
    longest = std::max(longest, length - p.gate_owed[w] - drained_within(start, start + length));
  }
  if (p.state == State::kGate && p.gate_since >= 0) {
    longest = std::max(longest, now_ - p.gate_since - p.owed - drained_within(p.gate_since, now_));
  }
  return longest;
}

std::string PolicyReplay::describe(std::size_t i) const {
  const ProcessScript& s = procs_[i].script;
  std::string out = "target " + std::to_string(s.target) +
                    (s.mode == Mode::kCap ? " cap" : " burst") + (s.liar ? " liar" : "") + ":";
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
    }
  }
  return out + (s.repeat ? " repeat" : "");
}

std::string PolicyReplay::trace_text() const {
  std::string out;
  char line[96];
  for (const TraceEntry& e : trace_) {
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
