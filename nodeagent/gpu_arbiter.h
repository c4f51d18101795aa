// GpuArbiter: the I/O shell of FAA for one physical GPU. It owns the GPU page
// (the slice holder every shim reads on each launch), the runtime of each
// instance on this GPU and their wake channels. tick() is scan -> policy ->
// publish: it reads what the shims published, hands it to the ArbiterPolicy
// (core/faa, where every decision is made), and publishes the holder (waking
// the waiters through the futex word) and the in-flight bound.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/accounting/step_usage.h"
#include "core/faa/arbiter_policy.h"
#include "core/model/instance_registry.h"
#include "core/shm/gpu_page_io.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/fail_mode.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/gpu_pages.h"
#include "nodeagent/instance_runtime.h"
#include "nodeagent/usage_ledger.h"
#include "nodeagent/wake_channel.h"

namespace egpu::agent {

struct ArbiterSettings {
  std::string runtime_dir;
  faa::PolicySettings policy;  // FAA, bounds, grace, drains: the decisions
  int64_t heartbeat_timeout_ns;
  FailMode fail_mode;
  uint64_t epoch;
  uint32_t max_slots;
};

struct InstanceView {  // for status and metrics
  faa::InstanceStats faa;
  uint64_t memory_used = 0;
  uint64_t memory_limit = 0;  // what its shims enforce (shm::kNoMemLimit: none)
  uint64_t throttled_ns = 0;
  // Device time charged to it (FAA's, since the agent started), and what its
  // shims reported: the job's own word, which the charge trims and floors.
  uint64_t device_ns = 0;
  uint64_t reported_device_ns = 0;
  uint64_t mem_denied = 0;
  uint64_t floor_charged_ns = 0;  // charged for holding beyond its reports
  uint32_t processes = 0;
  double target = 0;
};

class GpuArbiter {
 public:
  // Opens the GPU's pages (gpu_pages.h), or reopens those a previous agent
  // left, returning the instances its record page names in `recovered`.
  static Result<std::unique_ptr<GpuArbiter>> open(uint32_t gpu, uint64_t memory_bytes,
                                                  const ArbiterSettings& settings,
                                                  std::vector<model::Instance>* recovered);
  ~GpuArbiter();

  // Adds an instance with its FAA target (fraction of the GPU) and memory
  // limit; `reopen` after an agent restart keeps the instance page, its
  // processes' accounting and the limit its shims see until the next publish.
  Status add(const model::Instance& instance, double target, uint64_t mem_limit, bool reopen);
  void remove(uint64_t instance_id);
  // What the instance achieved over its life (its ledger totals after one
  // last look at its page), for the record of its step; call before remove().
  std::optional<accounting::StepUsage> finish(uint64_t instance_id);
  // The same as of the last fold (at most a heartbeat old), the instance
  // running on: a usage request (SPANK's checkpoints).
  std::optional<accounting::StepUsage> usage_so_far(uint64_t instance_id) const;
  // Applies new targets (fractions) and modes; shrinks are applied before grows.
  Status retarget(const std::map<uint64_t, std::pair<double, Mode>>& targets);
  void update_control(const model::Instance& instance);
  // The gang windows of this GPU's instances (one absent: none); invalid
  // ones are refused and logged, leaving that instance sliced on its own.
  void set_gang_windows(const std::map<uint64_t, faa::GangWindow>& windows);
  std::optional<faa::GangWindow> gang_window(uint64_t instance_id) const;
  // The node's GPUs decide together whether a gang holds its window.
  void share_gang_grants(std::shared_ptr<faa::GangGrants> grants) {
    policy_.share_gang_grants(std::move(grants), gpu_);
  }
  // Looks due at a gang boundary must not be taken late with another GPU's.
  bool has_gangs() const { return gangs_ > 0; }
  // The bytes the instance's shims may hold (shm::kNoMemLimit: no limit).
  void publish_memory_limit(uint64_t instance_id, uint64_t limit);
  // The bytes its processes hold now (read after a publish: see core/quota).
  uint64_t memory_used(uint64_t instance_id) const;

  // A process attaches: returns its process slot, or -1 when the instance is full.
  int attach(uint64_t instance_id, pid_t pid);
  void reclaim(uint64_t instance_id, uint32_t proc_slot, pid_t pid);
  // The pid the agent gave a process slot, or found there when it opened
  // the page (0 = free); for recovery.
  pid_t process_in_slot(uint64_t instance_id, uint32_t proc_slot) const;

  // Scans, charges, decides and publishes. Returns when to tick next.
  int64_t tick(int64_t now);
  void heartbeat(int64_t now);
  // Starts taking back what jobs grew their pages by, and logs what was
  // (InstanceRuntime::take_back_growth); the number of pages that grew.
  // Each second, and when a page could not be created.
  int trim_grown_pages(int64_t now, bool now_or_never = false);
  // Trims of grown pages started so far (the status shows them).
  uint64_t page_trims() const { return page_trims_; }
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
  std::optional<uint64_t> holder() const;
  faa::GpuStats gpu_stats(int64_t now) const { return policy_.scheduler().gpu_stats(now); }
  std::optional<InstanceView> view(uint64_t instance_id, int64_t now) const;
  // The time the instance has waited for the slice so far (FAA's count, from
  // its threads blocked at the gate; 0 for one not here).
  uint64_t waited_ns(uint64_t instance_id) const;
  // What the instance achieved so far (its ledger totals); nullptr if not here.
  const accounting::UsageTotals* usage(uint64_t instance_id) const;
  // The instance's page as the agent reads it; nullptr if not here.
  const InstanceRuntime* runtime(uint64_t instance_id) const;

 private:
  struct Member {
    model::Instance instance;
    InstanceRuntime runtime;
    WakeChannel wake;
    std::optional<faa::GangWindow> gang;
    accounting::UsageFold usage;  // this agent's counters -> the ledger
    uint64_t page_growths = 0;    // times its user grew its page
    int64_t growth_logged_ns = 0;
    bool said_wake_bound = false;  // logged that a grant woke kMaxWokenPerGrant
  };

  GpuArbiter(uint32_t gpu, uint64_t memory, const ArbiterSettings& settings, GpuPages pages,
             faa::ArbiterPolicy policy, UsageLedger ledger);
  // Adds what the member did since the last fold to its ledger totals.
  void fold_usage(uint32_t slot, Member& m, int64_t now);
  // Bumps the member's grant word and wakes its sleepers (bounded: see
  // core/shm/grant_futex.h); says once when a job parks more than the bound.
  void wake(Member& m);
  shm::GpuPage* page() const { return pages_.page(); }
  shm::GpuPageWriter writer() const { return shm::GpuPageWriter(page()); }
  void publish(std::optional<faa::InstanceId> holder, int64_t until);
  void publish_draining();
  void publish_bound();
  void write_control(const model::Instance& instance);

  uint32_t gpu_;
  uint64_t memory_bytes_;
  uint64_t page_trims_ = 0;
  ArbiterSettings settings_;
  GpuPages pages_;
  faa::ArbiterPolicy policy_;
  UsageLedger ledger_;
  UniqueFd readonly_fd_;
  std::map<uint32_t, Member> members_;                 // by slot (= FAA instance id)
  std::map<uint64_t, uint32_t> slot_of_;               // instance id -> slot
  uint32_t published_ = shm::kNoHolder;                // as written in the GPU page
  uint32_t gangs_ = 0;                                 // members with a gang window
  std::map<faa::InstanceId, faa::Activity> observed_;  // reused every tick
};

}  // namespace egpu::agent
