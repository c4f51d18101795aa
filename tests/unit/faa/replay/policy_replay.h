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
// thread is stalled (then when it runs again) or it lies. Each GPU runs one
// kernel at a time in launch order; a started kernel runs to its end.
//
// Several GPUs, each with its own policy, model a node. A collective (NCCL's
// kernels) holds its GPU, spinning, from when it starts there until every
// process of its communicator has started its part of the same call; then
// it runs its length. Gang members get their windows (gang_window.h).
#ifndef EGPU_TESTS_UNIT_FAA_REPLAY_POLICY_REPLAY_H
#define EGPU_TESTS_UNIT_FAA_REPLAY_POLICY_REPLAY_H

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
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
    // One collective of `length` on its communicator, then a sync when
    // `sync_every` is not 0.
    kCollective,
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
  static Step collective(Nanos length, bool sync = true) {
    return {Kind::kCollective, length, 1, sync ? 1U : 0U};
  }
};

struct ProcessScript {
  double target = 0.5;
  Mode mode = Mode::kBurst;
  Nanos start = 0;  // joins (and attaches) at this time
  std::vector<Step> steps;
  bool repeat = false;  // start the script over at its end
  // A hostile shim: claims a blocked thread and queued work, reports no device time.
  bool liar = false;
  // A hostile shim that holds without working: it waits at the gate like
  // any process, and once it holds it launches nothing, reports nothing and
  // says at every look that its last sync has just returned (the idle hint
  // of a process between a sync and its next launch).
  bool squatter = false;
  // A hostile shim that under-reports while it holds: it says no thread is
  // blocked and launches at every look, and reports only this fraction of
  // its device time (waiting at the gate, it is honest about being blocked).
  // 1: honest. With says_waking it says instead, while it holds, that a
  // thread is blocked and it has not launched yet (a thread woken from the
  // gate that has not run: forgiven out of its wake credit).
  double reports = 1.0;
  bool says_waking = false;
  // A busy host: a thread woken from the gate runs only this much later (it
  // still shows as blocked meanwhile, as a thread that has not run cannot
  // say otherwise).
  Nanos wake_delay = 0;
  uint32_t gpu = 0;  // the GPU (policy) it runs on
  int comm = -1;     // its communicator: collectives meet the other processes of it
  std::optional<GangWindow> gang;
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
  // The GPUs' policies share their gang decisions, as an agent's do; false:
  // each GPU decides alone, as if each were on a node of its own.
  bool one_node = true;
};

class PolicyReplay {
 public:
  // As many GPUs as the scripts name (at least one).
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
  // Collectives of process i that completed in [from, to).
  std::size_t collectives_done(std::size_t i, Nanos from, Nanos to) const;
  // Every grant to another instance than the last one granted, with the
  // device time the old one still had queued then.
  struct Handover {
    Nanos at;
    std::size_t from;
    std::size_t to;
    Nanos old_queued;
  };
  const std::vector<Handover>& handovers(uint32_t gpu = 0) const { return gpus_[gpu].handovers; }
  const std::vector<TraceEntry>& trace(uint32_t gpu = 0) const { return gpus_[gpu].trace; }
  std::string trace_text(uint32_t gpu = 0) const;
  const ArbiterPolicy& policy(uint32_t gpu = 0) const { return gpus_[gpu].policy; }
  std::size_t size() const { return procs_.size(); }
  uint64_t ticks() const;

 private:
  enum class State { kNotStarted, kReady, kGate, kWaking, kBound, kSync, kSleeping, kExited };
  struct Kernel {
    std::size_t owner;
    Nanos length;
    int64_t call = -1;  // a collective: its call's index on the owner's communicator
  };
  // One collective call of a communicator: who has started their part.
  struct Call {
    std::size_t arrived = 0;
    Nanos last_arrival = 0;
  };
  struct Gpu {
    explicit Gpu(ArbiterPolicy p) : policy(std::move(p)) {}
    ArbiterPolicy policy;
    std::deque<Kernel> device;
    Nanos kernel_started = 0;  // of device.front()
    Nanos next_tick = kNever;
    Nanos last_kick = -kSecond;
    std::optional<InstanceId> holder;  // may launch (nullopt while draining)
    std::optional<InstanceId> last_granted;
    std::vector<TraceEntry> trace;
    std::vector<Handover> handovers;
    std::vector<std::pair<Nanos, Nanos>> drains;  // [start, end) with nobody allowed to launch
    Nanos drain_since = -1;
    uint64_t ticks = 0;
    std::vector<std::size_t> procs;  // by policy id: the process's index
  };
  // Shared by the GPUs' policies when ReplayOptions::one_node.
  std::shared_ptr<GangGrants> grants_ = std::make_shared<GangGrants>();
  struct Proc {
    ProcessScript script;
    // Its id in its GPU's policy: ids repeat across GPUs, as the agent's
    // slots do (the order of the scripts on that GPU).
    InstanceId id = 0;
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
    int64_t calls = 0;                                // collectives launched
    std::vector<Nanos> call_ends;                     // when each completed
  };

  Nanos next_event() const;
  void advance_device(Nanos to);
  // Runs GPU g's kernels that end by `to`; true if one did.
  bool advance_gpu(Gpu& g, Nanos to);
  // The head kernel starts at `at` (a collective's part arrives then).
  void start_head(Gpu& g, Nanos at);
  Nanos head_end(const Gpu& g) const;  // kNever while a collective waits for peers
  void run_processes();
  bool run_one(std::size_t i);
  void next_step(Proc& p);
  void tick(uint32_t gpu);
  void kick(Gpu& g, Nanos when);  // a shim kicks the agent at `when` (>= now)
  void gate_kick(const Proc& p);  // a process starts to wait in the gate
  bool may_launch(std::size_t i) const;
  void launch(std::size_t i, Nanos length, int64_t call);
  Gpu& gpu_of(const Proc& p) { return gpus_[p.script.gpu]; }
  const Gpu& gpu_of(const Proc& p) const { return gpus_[p.script.gpu]; }
  bool draining(const Gpu& g) const { return !g.holder && g.drain_since >= 0; }

  ReplayOptions options_;
  std::vector<Gpu> gpus_;
  std::vector<Proc> procs_;
  std::map<std::pair<int, int64_t>, Call> calls_;  // by communicator and call index
  std::map<int, std::size_t> comm_size_;
  Nanos now_ = 0;
  Nanos drained_within(const Gpu& g, Nanos from, Nanos to) const;
};

}  // namespace egpu::faa::replay

#endif  // EGPU_TESTS_UNIT_FAA_REPLAY_POLICY_REPLAY_H
