// CPU time from /proc: one process's (utime + stime) and the whole machine's
// busy and total time, for CPU-use percentages over an interval.
#pragma once

#include <sys/types.h>

#include <optional>

namespace egpu::bench {

// Seconds of CPU `pid` has used (user + system), or nullopt if unreadable.
std::optional<double> process_cpu_seconds(pid_t pid);

struct HostCpuTimes {
  double busy_s = 0;   // all cores, everything but idle and iowait
  double total_s = 0;  // all cores
};
std::optional<HostCpuTimes> host_cpu_times();

}  // namespace egpu::bench
