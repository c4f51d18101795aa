#include "nodeagent/unmanaged_process_scanner.h"

#include <string>
#include <utility>

#include "core/util/log.h"
#include "nodeagent/proc_files.h"
#include "nodeagent/worker_pool.h"

namespace egpu::agent {
namespace {

// Started once; nullptr when it could not start.
WorkerPool* scan_workers() {
  static WorkerPool* pool = [] {
    auto* p = new WorkerPool(UnmanagedProcessScanner::kMaxWorkers);  // never destroyed
    if (p->start()) return p;
    EGPU_LOG_ERROR(
        "cannot start a thread to look for processes that use a GPU without the "
        "shim: none is looked for until the agent restarts");
    delete p;
    return static_cast<WorkerPool*>(nullptr);
  }();
  return pool;
}

}  // namespace

UnmanagedProcessScanner::UnmanagedProcessScanner() = default;

std::optional<UnmanagedProcessScanner::Result> UnmanagedProcessScanner::take_result() {
  if (stuck_result_) {
    auto result = std::move(stuck_result_);
    stuck_result_.reset();
    return result;
  }
  if (!scan_) return std::nullopt;
  std::lock_guard lock(scan_->mu);
  if (!scan_->done) return std::nullopt;
  Result result{std::move(scan_->result), std::nullopt};
  scan_.reset();
  return result;
}

bool UnmanagedProcessScanner::running(int64_t now) {
  if (!scan_) return false;
  {
    std::lock_guard lock(scan_->mu);
    if (scan_->done) return false;  // finished, its result not taken yet: take it first
  }
  const pid_t reading = scan_->progress.pid.load(std::memory_order_relaxed);
  if (reading == 0 || reading != last_reading_) {
    last_reading_ = reading;
    last_reading_seen_ = now;
    return true;
  }
  if (now - last_reading_seen_ < kStuckNs) return true;
  // Stuck on `reading`: its worker is left to it, and what it found so far
  // is the result, with the stuck process judged as it can be.
  Result found{{}, reading};
  uint64_t open_gpus = 0;
  {
    std::lock_guard lock(scan_->progress.mu);
    found.sightings = scan_->progress.found;
    if (scan_->progress.open_pid == reading) open_gpus = scan_->progress.open_gpus;
  }
  if (auto stuck = stuck_sighting(reading, open_gpus, scan_->gpu_count, scan_->attached))
    found.sightings.push_back(std::move(*stuck));
  stuck_result_ = std::move(found);
  maps_unreadable_[reading] = process_start_time(reading);
  stuck_.push_back(std::move(scan_));
  last_reading_ = 0;
  return false;
}

int UnmanagedProcessScanner::stuck_scans() {
  std::erase_if(stuck_, [](const std::shared_ptr<Scan>& scan) {
    std::lock_guard lock(scan->mu);
    return scan->done;
  });
  return static_cast<int>(stuck_.size());
}

bool UnmanagedProcessScanner::start(GpuProcessScanRequest request, int64_t now) {
  if (running(now)) return false;
  if (scan_ || stuck_result_) return false;  // a result waits to be taken
  if (stuck_scans() >= kMaxWorkers) return false;
  WorkerPool* workers = scan_workers();
  if (workers == nullptr) return false;
  // Forget the processes that are gone (a reused pid is read normally again).
  std::erase_if(maps_unreadable_,
                [](const auto& entry) { return process_start_time(entry.first) != entry.second; });
  request.maps_unreadable = maps_unreadable_;
  auto scan = std::make_shared<Scan>();
  scan->attached = request.attached;
  scan->gpu_count = request.devices.size();
  const bool queued = workers->run([scan, request = std::move(request)] {
    std::vector<model::GpuProcessSighting> result;
    try {
      result = scan_gpu_processes(request, &scan->progress);
    } catch (...) {
      result.clear();  // out of memory: an empty scan, the next one tries again
    }
    std::lock_guard lock(scan->mu);
    scan->result = std::move(result);
    scan->done = true;
  });
  if (!queued) return false;
  scan_ = std::move(scan);
  last_reading_ = 0;
  last_reading_seen_ = now;
  return true;
}

}  // namespace egpu::agent
