// UnmanagedProcessWatch: which processes use a shared GPU without the shim.
//
// The shim is what holds a job to its share and quota, and it runs inside the
// job: a job that unsets LD_PRELOAD, or calls the driver from a program the
// loader never preloads into, reaches the GPU unpaced and uncounted. The
// agent cannot stop such a process from opening the device (that is the
// device cgroup's job), but it can see it. A process that submits work to a
// GPU holds the GPU's device file open and maps it (the driver's doorbells).
// A managed process maps the shim (the installed file itself, not one of its
// name) and attached to the agent at its cuInit, or was forked from one that
// did (a PyTorch DataLoader worker inherits its maps). Both are needed: a
// process that attached and then exec'd a program without LD_PRELOAD keeps
// its pid (attached) but not the shim, and one forked and exec'd so by an
// attached process descends from it without the shim. A scan of /proc (the
// agent's, nodeagent/gpu_process_scan.h) reports the processes that map a
// managed GPU's device file and are not plainly managed, and this decides,
// in simulated time, which of them are escapes:
//   - only processes of a user who owns an instance on that GPU: root's
//     processes, and users with no instance on the GPU, are not egpu's to
//     judge (daemons such as nvidia-persistenced run as users of their own;
//     a whole-GPU job is on a GPU without instances);
//   - once a user has had such processes on the GPU for kGraceNs (a streak
//     that only kStreakGapScans scans in a row without one end), each of
//     them is due: the grace is the user's on that GPU, not each
//     process's, so a relay of processes, gaps and all, does not stay
//     under it. One that maps the shim is seen in two scans first: an
//     honest one caught once between the driver's cuInit and its attach is
//     never due. One without the shim cannot be that, and is due at first
//     sight, so of a relay of processes each shorter than a scan period
//     every one a scan meets is due (those none meets are the residual).
// A process that maps the shim, attaches, and then calls around it is not
// caught here (see README, "patched shim").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace egpu::model {

// A process a scan found mapping a managed GPU, not known to be attached.
struct GpuProcessSighting {
  int32_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat's starttime: with the pid, one process
  // The user it is judged as: its real uid, or for a process in a user
  // namespace whose uid owns no instance, the uid that owns the namespace
  // (a user's subordinate uids are that user's).
  uint32_t uid = 0;
  std::vector<uint32_t> gpus;      // managed GPUs whose device file it maps
  std::vector<int32_t> ancestors;  // its parent, grandparent ... (nearest first)
  bool maps_shim = false;          // maps the installed shim
  uint32_t process_uid = 0;        // its real uid as the agent sees it
};

// pid -> the GPUs where it is attached to an instance.
using AttachedProcesses = std::map<int32_t, std::set<uint32_t>>;

// Whether `s` or one of its ancestors is attached on `gpu`.
bool attached_on(const GpuProcessSighting& s, uint32_t gpu, const AttachedProcesses& attached);
// Whether `s` is managed on `gpu`: it maps the shim, and is attached_on it.
bool managed_on(const GpuProcessSighting& s, uint32_t gpu, const AttachedProcesses& attached);
// Whether it is managed on each GPU it maps.
bool managed_everywhere(const GpuProcessSighting& s, const AttachedProcesses& attached);

// A process found using `gpu` without the shim.
struct UnmanagedProcess {
  int32_t pid = 0;
  uint64_t start_time = 0;
  uint32_t uid = 0;
  uint32_t gpu = 0;
  int64_t first_seen_ns = 0;
  bool maps_shim = false;          // with the shim, unattached: refused, or kept from the agent
  bool due = false;                // its user's streak on the GPU passed the grace
  bool first = false;              // in observe()'s answer: due for the first time
  int scans_seen = 0;              // scans that saw it (not those that kept it unreached)
  std::vector<int32_t> ancestors;  // as last seen: whether it is attached now
  uint32_t process_uid = 0;        // its real uid (`uid` is whom it is judged as)
};

// Whether `p`, as last seen, is managed on its GPU by `attached` now: it
// maps the shim and it or an ancestor attached there since.
bool managed_now(const UnmanagedProcess& p, const AttachedProcesses& attached);

class UnmanagedProcessWatch {
 public:
  static constexpr int64_t kGraceNs = 2'000'000'000;
  static constexpr int kStreakGapScans = 3;

  // One completed scan at `now`. `owners[gpu]`: the uids that own an
  // instance on that GPU; `attached`: the pids attached to the agent now,
  // each with the GPUs of its instances (a sighting on a GPU that maps the
  // shim and is attached there, or descends from a process that is, is
  // managed there: a process attached on one GPU and driving another, its
  // EGPU_* environment changed, is not). Returns the
  // processes due at this scan: every one still seen (a kill is retried),
  // `first` set the first time. `stopped_at`: the scan was given up at this
  // pid and saw none above it (it reads /proc in pid order): those are kept
  // as the last scan saw them, but none becomes due by it (not seen, it is
  // not seen twice), and one now attached where it maps the shim is dropped.
  std::vector<UnmanagedProcess> observe(int64_t now,
                                        const std::vector<GpuProcessSighting>& sightings,
                                        const std::vector<std::set<uint32_t>>& owners,
                                        const AttachedProcesses& attached,
                                        std::optional<int32_t> stopped_at = std::nullopt);

  // Every process the last scan found unmanaged, due or not (for status).
  std::vector<UnmanagedProcess> current() const;
  // Processes that became due since the watch began.
  uint64_t total_due() const { return total_due_; }
  // Completed scans observed.
  uint64_t scans() const { return scans_; }

 private:
  struct Key {
    int32_t pid;
    uint64_t start_time;
    uint32_t gpu;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, UnmanagedProcess> seen_;
  struct Streak {
    int64_t since_ns = 0;  // its first scan with an unmanaged process
    int empty_scans = 0;   // scans in a row without one since the last
  };
  std::map<std::pair<uint32_t, uint32_t>, Streak> streaks_;  // by (uid, gpu)
  uint64_t total_due_ = 0;
  uint64_t scans_ = 0;
};

}  // namespace egpu::model
