// UnmanagedProcesses= (core/model/unmanaged_processes.h): once a second the
// agent takes the last /proc scan's sightings, judges them, acts on the
// processes that became due (kill, or report), and starts the next scan
// off its thread (nodeagent/unmanaged_process_scanner.h).
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "core/protocol/messages.h"
#include "core/util/clock.h"
#include "core/util/log.h"
#include "core/util/printable.h"
#include "core/util/unique_fd.h"
#include "nodeagent/agent.h"
#include "nodeagent/event_loop.h"
#include "nodeagent/proc_files.h"

namespace egpu::agent {
namespace {

constexpr int64_t kScanPeriodNs = 1'000'000'000;
// After a start that recovered instances nothing is judged for this long:
// processes attached to the agent before re-attach at their shim's next
// retry (every 5 s, after a timeout of up to 2 s), and until then they look
// unattached. A start that recovered none has no such processes: a process
// of a lost instance cannot attach again, and is gated by its shim anyway.
constexpr int64_t kQuietAfterStartNs = 15'000'000'000;

std::string command_of(pid_t pid) {
  std::string name = read_proc_file(pid, "comm");
  if (name.ends_with('\n')) name.pop_back();
  return name.empty() ? "?" : printable(name, Lines::kOne);
}

}  // namespace

Status Agent::start_unmanaged_watch() {
  if (config_.unmanaged_processes == config::UnmanagedAction::kOff) return {};
  // Looked up once, here: a shim on a hung network filesystem must not stop
  // the loop each second (a later version at the same path is known by it).
  shim_file_ = device_files({config_.shim_library}).front();
  if (!registry_->all().empty()) unmanaged_judged_from_ns_ = started_ns_ + kQuietAfterStartNs;
  unmanaged_timer_.reset(event_new(base_.get(), -1, EV_PERSIST, &Agent::on_unmanaged_timer, this));
  const timeval period{kScanPeriodNs / 1'000'000'000, 0};
  if (!unmanaged_timer_ || event_add(unmanaged_timer_.get(), &period) != 0)
    return Error{"cannot start looking for processes that use a GPU without the shim"};
  return {};
}

void Agent::on_unmanaged_timer(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<Agent*>(arg);
  self->watch_unmanaged(monotonic_ns());
}

void Agent::watch_unmanaged(int64_t now) {
  if (now < unmanaged_judged_from_ns_) return;
  // Who may be judged where: the owners of each GPU's instances, root never.
  std::vector<std::set<uint32_t>> owners(arbiters_.size());
  GpuProcessScanRequest request;
  for (const model::Instance* inst : registry_->all()) {
    if (inst->uid == 0 || inst->gpu >= owners.size()) continue;
    owners[inst->gpu].insert(inst->uid);
    request.uids.insert(inst->uid);
  }
  // Attached now: a process that attached since the scan was taken is
  // managed too (its attach was in the gap the grace covers).
  request.attached = tracker_->attached_gpus();
  const model::AttachedProcesses attached = request.attached;  // the request moves on
  if (auto scan = unmanaged_scanner_.take_result()) {
    for (const model::UnmanagedProcess& p :
         unmanaged_.observe(now, scan->sightings, owners, attached, scan->stopped_at))
      act_on_unmanaged(p);
  } else if (request.uids.empty()) {
    unmanaged_.observe(now, {}, owners, attached);  // nobody to judge: nothing is found
  }
  if (request.uids.empty()) return;
  std::vector<std::string> paths;
  for (uint32_t gpu = 0; gpu < arbiters_.size(); ++gpu)
    paths.push_back(config_.gpu_device_file(gpu));
  request.devices = device_files(paths);
  // The shim as the agent started (a newer one at its path is known by it).
  request.shims = {shim_file_};
  if (!unmanaged_scanner_.start(std::move(request), now) &&
      unmanaged_scanner_.stuck_scans() >= UnmanagedProcessScanner::kMaxWorkers &&
      unmanaged_stuck_log_.take(now).log) {
    EGPU_LOG_WARN(
        "looking for processes that use a GPU without the shim: %d scans wait on "
        "processes whose files cannot be read; none starts until one returns",
        unmanaged_scanner_.stuck_scans());
  }
}

void Agent::act_on_unmanaged(const model::UnmanagedProcess& p) {
  const bool kill = config_.unmanaged_processes == config::UnmanagedAction::kKill;
  if (!p.first && !kill) return;  // reported once
  // What the log says, read before the process goes.
  std::string command;
  std::string jobs;
  if (p.first) {
    command = command_of(p.pid);
    for (const model::Instance* inst : registry_->on_gpu(p.gpu)) {
      if (inst->uid != p.uid) continue;
      jobs += (jobs.empty() ? "" : ", ") + std::to_string(inst->job_id) + "." +
              protocol::step_label(inst->step_id);
    }
  }
  std::string outcome = "reported (UnmanagedProcesses=report)";
  if (kill) {
    // The pidfd names the process the scan saw only if its start time still
    // matches: a pid reused since is another process, left alone. A kill
    // that did not take is tried again at the next scan that sees it.
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0)));
    const std::optional<ProcStatus> status = read_proc_status(p.pid);
    if (!pidfd.valid() || process_start_time(p.pid) != p.start_time) {
      outcome = "gone before it could be killed";
    } else if (!status || status->uid != p.process_uid || status->uid == 0) {
      // It ran a set-uid program since the scan: no longer the user's.
      outcome = "not killed: it runs as another user now";
    } else if (model::managed_now(p, tracker_->attached_gpus())) {
      outcome = "not killed: it attached since the scan";
    } else if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) != 0) {
      outcome = std::string("not killed: ") + std::strerror(errno);
    } else {
      outcome = "killed";
      if (p.first) ++unmanaged_killed_;
    }
  }
  if (!p.first) return;  // said once per process
  // With the shim mapped it did not attach: refused (its instance has no
  // free process slot), or its shim kept from the agent (its environment).
  const char* how = p.maps_shim
                        ? "with the egpu shim loaded but not attached to the agent (refused a "
                          "process slot, or its EGPU_* environment changed)"
                        : "without the egpu shim (LD_PRELOAD unset, or the driver reached from a "
                          "program the loader did not preload into)";
  // A line per process, within its user's budget: a job that starts
  // hundreds must not push the agent's other warnings past journald's rate
  // limit (the status lists every one).
  const LogBudget::Verdict budget = log_budget(p.uid, unmanaged_log_budgets_);
  if (!budget.log) return;
  EGPU_LOG_WARN(
      "GPU %u: process %d (%s) of uid %u uses the GPU %s, outside the share and memory quota of "
      "its instances there (%s): %s%s",
      p.gpu, static_cast<int>(p.pid), command.c_str(), p.uid, how,
      jobs.empty() ? "none" : jobs.c_str(), outcome.c_str(), dropped_note(budget).c_str());
}

}  // namespace egpu::agent
