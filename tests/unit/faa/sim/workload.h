// What a simulated instance does with the GPU: how much work it has, when it
// arrives, and how long its kernels are (kernels cannot be preempted).
#ifndef EGPU_TESTS_UNIT_FAA_SIM_WORKLOAD_H
#define EGPU_TESTS_UNIT_FAA_SIM_WORKLOAD_H

#include "core/faa/types.h"

namespace egpu::faa::sim {

struct Workload {
  // Always has work and submits it as fast as it may.
  static Workload greedy(Nanos kernel) { return Workload{true, kernel, 0, 0, 0}; }
  // Never submits anything.
  static Workload idle() { return Workload{false, 0, 0, 0, 0}; }
  // `work` of device time arrives every `period`, the first at `first`.
  static Workload bursts(Nanos work, Nanos period, Nanos first, Nanos kernel) {
    return Workload{false, kernel, work, period, first};
  }

  // Only what the test submits (FaaSim::submit), e.g. a server's requests.
  static Workload on_demand(Nanos kernel) { return Workload{false, kernel, 0, 0, 0}; }

  // One `kernel` at a time, the next `think` after the previous one ended
  // (a simulation step followed by host work), the first at once.
  static Workload closed_loop(Nanos kernel, Nanos think) {
    return Workload{false, kernel, 0, 0, 0, think};
  }

  bool endless = false;
  Nanos kernel = 0;
  Nanos burst_work = 0;
  Nanos burst_period = 0;
  Nanos first_burst = 0;
  Nanos think = -1;  // closed loop when >= 0
};

}  // namespace egpu::faa::sim

#endif  // EGPU_TESTS_UNIT_FAA_SIM_WORKLOAD_H
