// egpu.conf: the node agent's and the plugins' configuration, in Slurm's
// Key=Value style. Unknown keys and bad values are errors that name the line,
// the key and what is accepted: a typo must never silently fall back to a default.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/fail_mode.h"
#include "core/util/mode.h"
#include "core/util/result.h"

namespace egpu::config {

enum class LogTarget { kStderr, kSyslog };
enum class LogLevel { kError, kWarning, kInfo, kDebug };
enum class GangClock { kAdjtimex, kShared };
// What the agent does with a process that uses a shared GPU without the shim
// (core/model/unmanaged_processes.h).
enum class UnmanagedAction { kKill, kReport, kOff };
constexpr const char* to_string(UnmanagedAction action) {
  return action == UnmanagedAction::kKill     ? "kill"
         : action == UnmanagedAction::kReport ? "report"
                                              : "off";
}

struct EgpuConfig {
  // Control socket and the directory of shared-memory pages (a tmpfs).
  std::string socket_path = "/run/egpu/agent.sock";
  std::string runtime_dir = "/run/egpu";
  // FAA.
  int slice_ms = 10;                 // 1..50
  int window_ms = 500;               // decay time constant of achieved shares
  double preempt_threshold_pct = 5;  // take the slice at once when this far below the holder
  int min_hold_us = 1000;            // no preemption before the holder had this long
  Mode default_mode = Mode::kBurst;
  // Shim behaviour.
  FailMode fail_mode = FailMode::kOpen;  // what shims do when the agent is gone
  int heartbeat_ms = 100;                // agent heartbeat period
  int heartbeat_timeout_ms = 1000;       // shims call the agent dead after this
  int inflight_us = 2000;                // device time a process may have queued
  // The same bound while a GPU has one job (burst) with processes: nobody
  // waits behind its queue then, and a deep queue hides its host stalls
  // (page faults, a busy Python thread, a shared VM losing its CPU). 0 = as
  // InflightUs.
  int inflight_alone_us = 20000;
  // At a handover the next holder starts when the old one has at most this
  // much queued: the two then barely share the device, and each one's events
  // time only its own work (a shared device makes both count the overlap).
  // Higher = no idle gap at handovers where processes wake slowly, less exact.
  int handover_tail_us = 200;
  // Gangs: a step's instances on several GPUs of the node hold their slices
  // together, in windows this long a period (their share of it) at one
  // offset on the wall clock, so collectives find their peers running and
  // nodes whose clocks agree open them together. 0 = sliced independently
  // (the default: see etc/egpu.conf for what a hostile rank can take).
  int gang_period_ms = 0;
  // Where the gangs' common time comes from. kAdjtimex: the kernel's clock
  // discipline (chrony, ntpd, PTP) says whether this clock agrees with other
  // nodes'. kShared: the nodes share one clock (containers or VMs of one host,
  // the testbed), so it agrees by construction.
  GangClock gang_clock = GangClock::kAdjtimex;
  // Metrics: Prometheus text over HTTP on a loopback address; empty = off.
  std::string metrics_address;
  // Logging.
  LogTarget log_target = LogTarget::kStderr;
  LogLevel log_level = LogLevel::kInfo;
  // GPUs: -1 = from the topology. Memory 0 = from the topology or the driver.
  int gpu_count = -1;
  uint64_t gpu_memory_bytes = 0;
  std::string topology_xml;  // hwloc XML instead of the live machine (test nodes)
  // Every step but extern is an instance, and a job's batch step is one
  // beside its steps: 100 one-unit jobs with a step each are 200. Fewer
  // slots than that run out before the units Slurm places by.
  int max_instances_per_gpu = 256;
  // job_submit/egpu (in slurmctld) keeps each node's Slurm weight packed
  // (core/model/node_weight.h): nodes with fewer free egpu units are tried
  // first, so shares fill nodes before they open another. Read from the
  // controller's egpu.conf, which it watches: a change applies within a
  // second, without a restart.
  bool pack_nodes = false;
  // SPANK records what each step achieved in its job's AdminComment when the
  // step ends on the node (core/accounting/admin_comment.h); `no` for sites
  // that keep AdminComment for something else.
  bool step_records = true;
  // While a step runs, SPANK checkpoints its usage so far into the job's
  // AdminComment every this many seconds (running=1 records, which the final
  // one replaces), so a step the job's end cuts short (scancel, time limit,
  // node failure) keeps a record; 0 = final records only.
  int step_record_interval_s = 300;
  // A group (name or number) whose members count for themselves on the
  // control socket where they own no instance: monitoring or service
  // accounts that run `egpuctl status` on every node. Without it they share
  // one uid's connections with every uid that owns no instance there,
  // subordinate uids included. Empty = none.
  std::string monitor_group;
  // Where the SPANK plugin finds the shim to preload.
  std::string shim_library = "/usr/lib/x86_64-linux-gnu/egpu/libegpu-shim.so";
  // A job's process that maps a GPU's device file but never attached through
  // the shim (it unset LD_PRELOAD, or its loader never preloads) escapes its
  // share and quota:
  // killed (kill), logged and listed in the status (report), or not looked
  // for (off).
  UnmanagedAction unmanaged_processes = UnmanagedAction::kKill;
  // Each GPU's device file, "%d" standing for the GPU's index (the order of
  // nvidia-smi and of the topology, which is the device minor's on the
  // driver's own numbering).
  std::string gpu_device_files = "/dev/nvidia%d";

  // GPU `gpu`'s device file (gpu_device_files with its index for "%d").
  std::string gpu_device_file(uint32_t gpu) const;
  // Metrics address split into host and port (valid only when set).
  std::string metrics_host() const;
  int metrics_port() const;
};

// Parses configuration text. `source` names it in error messages.
Result<EgpuConfig> parse_egpu_config(std::string_view text, std::string_view source);
// Reads and parses a file; a missing file is an error naming the path.
Result<EgpuConfig> load_egpu_config(const std::string& path);

// The keys egpu.conf accepts, for --help output and error messages.
std::vector<std::string> egpu_config_keys();

}  // namespace egpu::config
