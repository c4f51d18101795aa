// PolicyReplay: the agent's ArbiterPolicy and SliceScheduler driven in
// simulated time by scripted processes, the way the agent and the shims drive
// them on a node, with nothing measured on a wall clock. Event-driven: time
// jumps to the next kernel end, policy tick, wake-up or end of a host stall,
// so thousands of scenarios run per second and each one is exact.
//
// The shim model: a process launches only while its instance holds the slice
// and its queued device time is below the in-flight bound; otherwise it blocks
// (busy) in the gate or at the bound, and a blocked gate kicks the agent.
// Completed device time is reported at once, unless the process's host
// thread is stalled (then when it runs again) or it lies. The device runs one
// kernel at a time in launch order; a started kernel runs to its end.
#ifndef EGPU_TESTS_UNIT_FAA_REPLAY_POLICY_REPLAY_H
#define EGPU_TESTS_UNIT_FAA_REPLAY_POLICY_REPLAY_H

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/faa/arbiter_policy.h"

namespace egpu::faa::replay {

// One step of a process's script.
struct Step {
  enum class Kind {
    kKernels,  // `count` kernels of `length` (0 = forever), sync after every `sync_every`
    kIdle,     // after a sync: nothing for `length`
    kStall,    // the host does not run the thread for `length` (no launches, no reports)
    kExit,     // the process exits; its queued work is dropped
  };
  Kind kind = Kind::kKernels;
  Nanos length = 0;
  uint64_t count = 0;
  uint64_t sync_every = 0;

  static Step kernels(Nanos length, uint64_t count = 0, uint64_t sync_every = 0) {
    return {Kind::kKernels, length, count, sync_every};
  }
  static Step idle(Nanos length) { return {Kind::kIdle, length, 0, 0}; }
  static Step stall(Nanos length) { return {Kind::kStall, length, 0, 0}; }
  static Step exit() { return {Kind::kExit, 0, 0, 0}; }
};

struct ProcessScript {
  double target = 0.5;
  Mode mode = Mode::kBurst;
  Nanos start = 0;  // joins (and attaches) at this time
  std::vector<Step> steps;
  bool repeat = false;  // start the script over at its end
  // A hostile shim: claims a blocked thread and queued work, reports no device time.
  bool liar = false;
  // A busy host: a thread woken from the gate runs only this much later (it
  // still shows as blocked meanwhile, as a thread that has not run cannot
  // say otherwise).
  Nanos wake_delay = 0;
};

// A change of who may launch.
struct TraceEntry {
  Nanos at = 0;
  int holder = -1;  // index of the instance, -1 for nobody
  bool draining = false;
  Nanos slice_end = 0;
  bool operator==(const TraceEntry&) const = default;
};

struct ReplayOptions {
  PolicySettings settings;
  Nanos launch_cost = 5 * kMicrosecond;  // host time per launch
  Nanos kick_latency = 20 * kMicrosecond;
  Nanos min_kick_interval = 100 * kMicrosecond;  // the agent's kick rate limit
};

class PolicyReplay {
 public:
  PolicyReplay(ReplayOptions options, std::vector<ProcessScript> scripts);

  void run_until(Nanos end);
  Nanos now() const { return now_; }

  // Exact device time instance `i` ran in [from, to).
  Nanos used(std::size_t i, Nanos from, Nanos to) const;
  double share(std::size_t i, Nanos from, Nanos to) const;
  // Longest time it waited blocked in the gate (ended waits and the current
  // one), of the waits that began at or after `from`.
  Nanos longest_gate_wait(std::size_t i, Nanos from = 0) const;
  // The same, less what FAA owes the others for its own last grant before
  // each wait (device time beyond a slice, repaid at its target rate) and
  // less the handover drains within it (other holders' queued work, which
  // FAA's slices do not count).
  Nanos longest_gate_wait_beyond_owed(std::size_t i) const;
  std::string describe(std::size_t i) const;
  // Every grant to another instance than the last one granted, with the
  // device time the old one still had queued then.
  struct Handover {
    Nanos at;
    std::size_t from;
    std::size_t to;
    Nanos old_queued;
  };
  const std::vector<Handover>& handovers() const { return handovers_; }
  const std::vector<TraceEntry>& trace() const { return trace_; }
  std::string trace_text() const;
  const ArbiterPolicy& policy() const { return policy_; }
  std::size_t size() const { return procs_.size(); }
  uint64_t ticks() const { return ticks_; }

 private:
  enum class State { kNotStarted, kReady, kGate, kWaking, kBound, kSync, kSleeping, kExited };
  struct Kernel {
    std::size_t owner;
    Nanos length;
  };
  struct Proc {
    ProcessScript script;
    State state = State::kNotStarted;
    std::size_t step = 0;
    uint64_t done_in_step = 0;  // kernels launched in the current step
    Nanos wake_at = 0;          // kSleeping / kReady: runs again at
    bool stalled = false;       // sleeping because of a host stall
    Nanos queued = 0;           // launched, not yet completed
    Nanos unreported = 0;       // completed, not yet reported
    Nanos reported = 0;         // reported, not yet scanned
    bool launched = false;      // since the last scan
    Nanos idle_since = 0;
    Nanos gate_since = -1;
    std::vector<std::pair<Nanos, Nanos>> gate_waits;  // start, length
    std::vector<Nanos> gate_owed;                     // per wait, see above
    Nanos granted_at = -1;                            // its current run of grants began
    Nanos owed = 0;                                   // for its last run of grants
    std::vector<std::pair<Nanos, Nanos>> ran;         // device intervals
  };

  Nanos next_event() const;
  void advance_device(Nanos to);
  void run_processes();
  bool run_one(std::size_t i);
  void next_step(Proc& p);
  void tick();
  void kick(Nanos when);          // a shim kicks the agent at `when` (>= now)
  void gate_kick(const Proc& p);  // a process starts to wait in the gate
  bool may_launch(std::size_t i) const;

  ReplayOptions options_;
  ArbiterPolicy policy_;
  std::vector<Proc> procs_;
  std::deque<Kernel> device_;
  Nanos kernel_started_ = 0;  // of device_.front()
  Nanos now_ = 0;
  Nanos next_tick_ = 0;
  Nanos last_kick_ = -kSecond;
  std::optional<InstanceId> holder_;  // may launch (nullopt while draining)
  std::optional<InstanceId> last_granted_;
  std::vector<TraceEntry> trace_;
  std::vector<Handover> handovers_;
  std::vector<std::pair<Nanos, Nanos>> drains_;  // [start, end) with nobody allowed to launch
  Nanos drain_since_ = -1;
  Nanos drained_within(Nanos from, Nanos to) const;
  uint64_t ticks_ = 0;
};

}  // namespace egpu::faa::replay

#endif  // EGPU_TESTS_UNIT_FAA_REPLAY_POLICY_REPLAY_H
