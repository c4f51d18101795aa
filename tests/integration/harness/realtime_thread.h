// Puts the calling thread on one CPU (cpu >= 0) at a SCHED_FIFO priority, so
// that only the host or the kernel can delay it: the StallMonitor's sleepers
// and egpu-host-stalls' spinners. Returns 0 or the pthread error (not root).
#pragma once

#include <pthread.h>
#include <sched.h>

namespace egpu::harness {

inline int pin_realtime(int cpu, int priority) {
  if (cpu >= 0) {
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(cpu, &only);
    (void)pthread_setaffinity_np(pthread_self(), sizeof only, &only);
  }
  sched_param param{};
  param.sched_priority = priority;
  return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
}

}  // namespace egpu::harness
