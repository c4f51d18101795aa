// UnmanagedProcessScanner: runs the agent's /proc scans (gpu_process_scan.h)
// on a worker, one at a time, and hands their results back to the agent's
// thread, which polls (no wake-up crosses threads). A job can make a read of
// its own process's maps wait (its mmap lock, held behind a fault that a
// FUSE file never answers): a scan stuck on one pid for kStuckNs is left to
// its worker; what it found so far, with the stuck process judged by its
// open GPU files and its attachment, counts as a completed scan; that pid
// is looked at through its descriptors from then on; and the next scan
// starts on another worker, up to kMaxWorkers stuck (a stuck process that
// is not attached is killed on that evidence, which ends its fault and
// frees the worker; one that is attached keeps its worker). The
// workers are the process's (never destroyed, like the page chores'): a scan
// may outlive the agent that started it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "nodeagent/gpu_process_scan.h"

namespace egpu::agent {

class UnmanagedProcessScanner {
 public:
  static constexpr int kMaxWorkers = 16;
  static constexpr int64_t kStuckNs = 5'000'000'000;

  UnmanagedProcessScanner();

  struct Result {
    std::vector<model::GpuProcessSighting> sightings;
    // A scan given up on: the pid it was stuck on (it read /proc in pid
    // order, so it saw nothing above); nullopt for a scan that ended.
    std::optional<int32_t> stopped_at;
  };
  // A finished scan's result, once; nullopt while none has finished since
  // the last call.
  std::optional<Result> take_result();
  // Starts a scan unless one is running (and not stuck); false when none
  // could start. `request.maps_unreadable` is filled in here.
  bool start(GpuProcessScanRequest request, int64_t now);
  // The processes (pid -> start time) whose files could not be read in time.
  const std::map<pid_t, uint64_t>& maps_unreadable() const { return maps_unreadable_; }
  // Scans left to stuck workers that have not finished yet.
  int stuck_scans();

 private:
  struct Scan {
    ScanProgress progress;
    model::AttachedProcesses attached;  // the request's
    size_t gpu_count = 0;
    std::mutex mu;
    bool done = false;
    std::vector<model::GpuProcessSighting> result;
  };
  // True while `scan_` runs and has not been stuck on one pid too long.
  bool running(int64_t now);

  std::shared_ptr<Scan> scan_;
  // What a scan left stuck had found, taken as its result.
  std::optional<Result> stuck_result_;
  pid_t last_reading_ = 0;
  int64_t last_reading_seen_ = 0;
  std::map<pid_t, uint64_t> maps_unreadable_;
  std::vector<std::shared_ptr<Scan>> stuck_;  // left to their workers
};

}  // namespace egpu::agent
