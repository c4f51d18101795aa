// UnmanagedProcessWatch: which processes use a shared GPU without the shim.
//
// The shim is what holds a job to its share and quota, and it runs inside the
// job: a job that unsets LD_PRELOAD, or calls the driver from a program the
// loader never preloads into, reaches the GPU unpaced and uncounted. The
// agent cannot stop such a process from opening the device (that is the
// device cgroup's job), but it can see it: the CUDA driver maps the GPU's
// device file into every process that submits work to it, and a process the
// shim was preloaded into maps the shim. So a scan of /proc (the agent's,
// nodeagent/gpu_process_scan.h) reports, per process, the managed GPUs whose
// device file it maps and whether it maps the shim; this decides, in
// simulated time, which of them are escapes:
//   - a process of a user who owns an instance on a GPU, mapping that GPU
//     and not the shim (root's processes, and users with no instance on the
//     GPU, are not egpu's to judge: daemons such as nvidia-persistenced run
//     as users of their own, and a whole-GPU job is on a GPU without
//     instances);
//   - seen so in two scans at least kGraceNs apart, so that a process caught
//     between exec and its loader mapping the shim is not taken for one.
// A process forked from a managed one (a PyTorch DataLoader worker) inherits
// the shim's mapping and is managed. One that maps the shim and calls around
// it is not caught here (see README, "patched shim").
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace egpu::model {

// One process as a scan saw it.
struct GpuProcessSighting {
  int32_t pid = 0;
  uint64_t start_time = 0;     // /proc/PID/stat's starttime: with the pid, one process
  uint32_t uid = 0;            // real uid
  std::vector<uint32_t> gpus;  // managed GPUs whose device file it maps
  bool maps_shim = false;
};

// A process found using `gpu` without the shim.
struct UnmanagedProcess {
  int32_t pid = 0;
  uint64_t start_time = 0;
  uint32_t uid = 0;
  uint32_t gpu = 0;
  int64_t first_seen_ns = 0;
  bool due = false;  // past the grace: to be acted on (UnmanagedProcesses=)
};

class UnmanagedProcessWatch {
 public:
  static constexpr int64_t kGraceNs = 2'000'000'000;

  // One completed scan at `now`; `owners[gpu]`: the uids that own an
  // instance on that GPU. Returns the processes that became due at this
  // scan (each once for as long as it is seen).
  std::vector<UnmanagedProcess> observe(int64_t now,
                                        const std::vector<GpuProcessSighting>& sightings,
                                        const std::vector<std::set<uint32_t>>& owners);

  // Every process the last scan found unmanaged, due or not (for status).
  std::vector<UnmanagedProcess> current() const;
  // Processes that became due since the watch began.
  uint64_t total_due() const { return total_due_; }

 private:
  struct Key {
    int32_t pid;
    uint64_t start_time;
    uint32_t gpu;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, UnmanagedProcess> seen_;
  uint64_t total_due_ = 0;
};

}  // namespace egpu::model
