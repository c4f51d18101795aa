// A simulated GPU driven by a real SliceScheduler, the way the agent drives it:
// a clock advancing in ticks, instances with workloads, a device that runs one
// kernel at a time (a started kernel runs to its end, whoever holds the slice),
// measured device time charged to the scheduler, and decide() every tick.
// The harness measures exact device time per instance and every wait itself, so
// tests judge the scheduler by what happened on the device, not by its stats.
#ifndef EGPU_TESTS_UNIT_FAA_SIM_FAA_SIM_H
#define EGPU_TESTS_UNIT_FAA_SIM_FAA_SIM_H

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "core/faa/slice_scheduler.h"
#include "sim/workload.h"

namespace egpu::faa::sim {

struct SimOptions {
  Config config;
  // Simulation step; kernels and grants fall on tick boundaries.
  Nanos tick = 100 * kMicrosecond;
  // How often measured device time is charged (the agent's check period).
  Nanos charge_period = 100 * kMicrosecond;
  // Like the agent: a holder whose kernel outlasts its slice keeps the device
  // until the kernel ends, and the scheduler decides again only then (off: the
  // next holder's grant starts while that kernel still runs).
  bool hold_through_overrun = false;
};

class FaaSim {
 public:
  explicit FaaSim(SimOptions options);

  // Adds an instance at the current time; returns its index in the harness.
  std::size_t add(double target, Mode mode, Workload workload);
  void remove(std::size_t instance);
  void resize(std::size_t instance, double target, Mode mode);

  // A request of `work` device time arrives now at an on_demand instance; it
  // is served first come, first served, in the instance's kernels.
  void submit(std::size_t instance, Nanos work);
  struct Completion {
    Nanos at;       // the end of the tick in which its last work ran
    Nanos latency;  // from its arrival
  };
  // Requests completed since the last call.
  std::vector<Completion> take_completions(std::size_t instance);

  // Simulates up to (not including) `end`.
  void run_until(Nanos end);
  Nanos now() const { return now_; }

  // Exact device time the instance used in [from, to) (tick-aligned).
  Nanos used(std::size_t instance, Nanos from, Nanos to) const;
  double share(std::size_t instance, Nanos from, Nanos to) const;
  // Longest stretch it waited asking without holding the slice, whole run.
  // A wait still in progress counts up to now().
  Nanos longest_wait(std::size_t instance) const;
  // Largest device time it used in any window of `window` starting in [from, to - window].
  Nanos max_window_use(std::size_t instance, Nanos window, Nanos from, Nanos to) const;
  // Times at which the instance was granted the slice (new grants only).
  const std::vector<Nanos>& grant_times(std::size_t instance) const {
    return instances_[instance].grant_times;
  }

  SliceScheduler& scheduler() { return scheduler_; }
  InstanceId id(std::size_t instance) const { return instances_[instance].id; }

 private:
  struct Simulated {
    InstanceId id;
    Workload workload;
    bool present = true;
    Nanos pending = 0;  // device time it still wants to submit
    Nanos next_arrival = 0;
    Nanos uncharged = 0;  // used but not yet charged
    bool asking = false;
    Nanos waiting_since = 0;
    bool waiting = false;
    Nanos longest_wait = 0;
    std::vector<Nanos> used_per_tick;  // indexed by tick number
    std::vector<Nanos> grant_times;
    struct Request {
      Nanos arrival;
      Nanos left;
    };
    std::deque<Request> requests;
    std::vector<Completion> completions;
  };

  // Device time `use` ran for `instance`'s requests in this tick.
  void serve(Simulated& instance, Nanos use);

  void step();
  void arrivals();
  void update_asking();
  void charge_all();
  void note_grant(const Grant& grant);
  void run_device();

  SimOptions options_;
  SliceScheduler scheduler_;
  std::vector<Simulated> instances_;
  Nanos now_ = 0;
  Nanos last_charge_ = 0;
  InstanceId next_id_ = 100;
  // The running kernel: owner index and remaining time.
  std::size_t kernel_owner_ = 0;
  Nanos kernel_left_ = 0;
  std::optional<InstanceId> holder_;
  Nanos grant_until_ = 0;
  std::uint64_t sequence_ = 0;
};

}  // namespace egpu::faa::sim

#endif  // EGPU_TESTS_UNIT_FAA_SIM_FAA_SIM_H
