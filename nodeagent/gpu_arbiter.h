// GpuArbiter: FAA for one physical GPU. It owns the GPU page (the slice holder
// every shim reads on each launch), the FAA SliceScheduler, and the runtime of
// each instance on this GPU. tick() reads what the shims published, charges
// device time, updates who is asking, decides, and publishes the holder
// (waking the waiters through the futex word) when it changes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/faa/held_time_floor.h"
#include "core/faa/slice_scheduler.h"
#include "core/model/instance_registry.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/instance_runtime.h"
#include "nodeagent/wake_channel.h"

namespace egpu::agent {

struct ArbiterSettings {
  std::string runtime_dir;
  faa::Config faa;
  int64_t heartbeat_timeout_ns;
  int64_t inflight_limit_ns;
  int64_t inflight_alone_ns = 0;  // while one burst instance alone has processes; 0 = the same
  shm::PageFailMode fail_mode;
  uint64_t epoch;
  uint32_t max_slots;
  int64_t idle_grace_ns = 500'000;  // holder: no launch and nobody blocked this long = idle
  int64_t poll_ns = 500'000;        // how often a contended holder is checked
  // Longest wait for an old holder's tail (one that keeps reporting it).
  int64_t max_drain_ns = 60'000'000;
  int64_t drain_poll_ns = 100'000;  // how often a draining tail is checked
  // Handover: the next holder starts when the old one has at most this much
  // queued, so the two (almost) never share the device and each one's events
  // time only its own work; whatever overlap is left, trim_overcharge splits.
  int64_t handover_tail_ns = 200'000;
  // Beyond the tail's estimate, before giving up on a holder that has stopped
  // reporting it (one that is not blocked in the gate, the bound or a sync).
  int64_t drain_slack_ns = 1'000'000;
};

struct InstanceView {  // for status and metrics
  faa::InstanceStats faa;
  uint64_t memory_used = 0;
  uint64_t throttled_ns = 0;
  uint64_t device_ns = 0;
  uint64_t mem_denied = 0;
  uint64_t floor_charged_ns = 0;  // charged for holding beyond its reports
  uint32_t processes = 0;
  double target = 0;
};

class GpuArbiter {
 public:
  // Opens the GPU page, or reopens the one a previous agent left, returning
  // the instances recorded in it in `recovered`.
  static Result<std::unique_ptr<GpuArbiter>> open(uint32_t gpu, uint64_t memory_bytes,
                                                  const ArbiterSettings& settings,
                                                  std::vector<model::Instance>* recovered);
  ~GpuArbiter();

  static std::string page_path(const std::string& runtime_dir, uint32_t gpu);

  // Adds an instance with its FAA target (fraction of the GPU); `reopen` after
  // an agent restart keeps the instance page and its processes' accounting.
  Status add(const model::Instance& instance, double target, bool reopen);
  void remove(uint64_t instance_id);
  // Applies new targets (fractions) and modes; shrinks are applied before grows.
  Status retarget(const std::map<uint64_t, std::pair<double, protocol::Mode>>& targets);
  void update_control(const model::Instance& instance);

  // A process attaches: returns its process slot, or -1 when the instance is full.
  int attach(uint64_t instance_id, pid_t pid);
  void reclaim(uint64_t instance_id, uint32_t proc_slot, pid_t pid);
  // The pid recorded in a process slot (0 = free); for recovery.
  pid_t process_in_slot(uint64_t instance_id, uint32_t proc_slot) const;

  // Scans, charges, decides and publishes. Returns when to tick next.
  int64_t tick(int64_t now);
  void heartbeat(int64_t now);
  // Stops arbitrating (agent exit): the gate opens and waiters wake.
  void shutdown();

  uint32_t gpu() const { return gpu_; }
  uint64_t memory_bytes() const { return memory_bytes_; }
  // A read-only descriptor of the GPU page, the one shims get.
  int gpu_page_readonly_fd() const { return readonly_fd_.get(); }
  int instance_page_fd(uint64_t instance_id) const;
  // The instance's wake channel: the agent's end (to watch), the end its
  // processes get at attach, and one bounded drain of what they sent.
  int wake_fd(uint64_t instance_id) const;
  int shim_wake_fd(uint64_t instance_id) const;
  WakeChannel::Drained drain_wake(uint64_t instance_id);
  const std::string& gpu_page_path() const { return path_; }
  std::optional<uint64_t> holder() const;
  faa::GpuStats gpu_stats(int64_t now) const { return scheduler_.gpu_stats(now); }
  std::optional<InstanceView> view(uint64_t instance_id, int64_t now) const;

 private:
  struct Member {
    model::Instance instance;
    InstanceRuntime runtime;
    WakeChannel wake;
    double target;
    int64_t last_activity = 0;
    bool asking = false;
    int64_t inflight_ns = 0;
    int64_t reported_inflight_ns = 0;  // InstanceActivity::reported_inflight_ns
    faa::HeldTimeFloor floor;          // its reports cannot hold the slice for free
  };

  GpuArbiter(uint32_t gpu, uint64_t memory, const ArbiterSettings& settings, shm::PageFile page,
             faa::SliceScheduler scheduler);
  shm::GpuPage* page() const { return page_.mapping.as<shm::GpuPage>(); }
  void publish(std::optional<faa::InstanceId> holder, int64_t until);
  void publish_draining();
  void write_control(const model::Instance& instance);
  // Publishes the in-flight bound that fits who has processes on the GPU now
  // (`scanned`: this tick's scan of every member, in members_ order).
  void update_inflight_bound(const std::vector<InstanceActivity>* scanned = nullptr);

  uint32_t gpu_;
  uint64_t memory_bytes_;
  ArbiterSettings settings_;
  std::string path_;
  shm::PageFile page_;
  faa::SliceScheduler scheduler_;
  UniqueFd readonly_fd_;
  std::map<uint32_t, Member> members_;    // by slot (= FAA instance id)
  std::map<uint64_t, uint32_t> slot_of_;  // instance id -> slot
  uint32_t published_ = shm::kNoHolder;
  // Device time the GPU can have delivered and not yet been charged for.
  int64_t charge_credit_ns_ = 0;
  int64_t last_tick_ns_ = 0;
  bool contended_ = false;  // someone besides the holder asked at the last tick
  // A handover waiting for the old holder's long queued work to finish.
  int64_t drain_until_ns_ = 0;     // the tail estimate's deadline
  int64_t drain_started_ns_ = 0;   // when that drain began (MaxDrain counts from it)
  int64_t inflight_bound_ns_ = 0;  // as published in the GPU page
  int64_t loose_bound_ns_ = 0;     // the deeper bound before it last tightened
  int64_t loose_until_ns_ = 0;     // until then, queues up to it are no long kernel
};

// The in-flight bound for a GPU where `with_processes` instances have
// processes attached and `all_burst` says whether they are all in burst mode.
// A lone burst instance gets the deeper alone bound: nobody can be waiting
// behind its queue. A capped one does not: its queue would run past its cap.
int64_t inflight_bound(const ArbiterSettings& settings, size_t with_processes, bool all_burst);

// Charges reported in one tick, trimmed so the GPU is never charged more
// time than passed. Shims measure their work with events; around a handover
// the old holder's queued tail and the new holder's first kernels share the
// device and both measure the overlap, so the excess is taken equally from
// the instances charged (each pays for its half of the overlap).
std::vector<int64_t> trim_overcharge(const std::vector<int64_t>& charges, int64_t* credit_ns);

}  // namespace egpu::agent
